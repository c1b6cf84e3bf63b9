{
  "targets": [
    {
      "target_name": "pidfence",
      "sources": [
        "native/addon.cc",
        "native/boot_clock.cc",
        "native/boot_id.cc",
        "native/exit_watch.cc",
        "native/job_cgroup.cc",
        "native/job_cgroup_entry.cc",
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
    # launcher target: begin (docs/decisions/0151; outside the addon's source digest, in its own)
    ,{
      "target_name": "pidfence-launcher",
      "type": "executable",
      "sources": [
        "native/launcher/cgroup.c",
        "native/launcher/held_term.c",
        "native/launcher/job_log.c",
        "native/launcher/launcher.c",
        "native/launcher/leftovers.c",
        "native/launcher/order.c",
        "native/launcher/receipt.c"
      ],
      "defines": [
        "PIDFENCE_LAUNCHER_SOURCE_DIGEST=\"<!(node native/tools/source-digest.js launcher)\""
      ],
      "cflags!": ["-std=gnu99", "-std=gnu11"],
      "cflags": ["-std=c17", "-O2", "-Wall", "-Wextra", "-Wshadow", "-Wformat=2", "-Werror", "-pthread"],
      "ldflags": ["-pthread"]
    }
    # launcher target: end
  ]
}
