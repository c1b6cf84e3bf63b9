{
  "targets": [
    {
      "target_name": "pidfence",
      "sources": [
        "native/addon.cc",
        "native/boot_id.cc",
        "native/exit_watch.cc",
        "native/pidfd.cc",
        "native/proc_stat.cc"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_DISABLE_CPP_EXCEPTIONS",
        "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS",
        "PIDFENCE_SOURCE_DIGEST=<!(node native/tools/source-digest.js)"
      ],
      "cflags_cc!": ["-std=gnu++17", "-std=gnu++20"],
      "cflags_cc": [
        "-std=c++17",
        "-isystem",
        "<!(node -p \"require('path').dirname(require.resolve('node-addon-api'))\")",
        "-fno-exceptions",
        "-Wall",
        "-Wextra",
        "-Wshadow",
        "-Wformat=2",
        "-Werror"
      ]
    }
  ]
}
