// A preload (`node --require`) for tests that emulate a power cut at an acknowledgement
// (docs/decisions/0010): the first stdout/stderr write that matches PIDFENCE_TEST_ACK_PATTERN
// freezes the whole process (a blocking read of a FIFO, so no timer or callback runs) after it
// creates PIDFENCE_TEST_ACK_MARKER, until the test writes one byte to PIDFENCE_TEST_ACK_FIFO.
import { closeSync, openSync, readSync, writeFileSync } from 'node:fs';

const pattern = process.env.PIDFENCE_TEST_ACK_PATTERN;
const fifo = process.env.PIDFENCE_TEST_ACK_FIFO;
const marker = process.env.PIDFENCE_TEST_ACK_MARKER;

function freeze(fifoPath: string, markerPath: string): void {
  writeFileSync(markerPath, '');
  const fd = openSync(fifoPath, 'r');
  try {
    readSync(fd, Buffer.alloc(1));
  } finally {
    closeSync(fd);
  }
}

if (pattern !== undefined && fifo !== undefined && marker !== undefined) {
  const acknowledgement = new RegExp(pattern);
  let frozen = false;
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (!frozen && acknowledgement.test(String(chunk))) {
        frozen = true;
        freeze(fifo, marker);
      }
      return write(chunk, ...rest);
    }) as typeof stream.write;
  }
}
