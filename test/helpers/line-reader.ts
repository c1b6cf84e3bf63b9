// Reads a child's output line by line, each read bounded: a fixture that falls silent fails loudly.

/** Returns a function that resolves with the next line of `stream`, or rejects after `timeoutMs`. */
export function lineReader(
  stream: NodeJS.ReadableStream,
  what = 'the child',
  timeoutMs = 10_000,
): () => Promise<string> {
  let buffered = '';
  const lines: string[] = [];
  const waiting: Array<(line: string) => void> = [];
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const line of parts) (waiting.shift() ?? ((l: string) => lines.push(l)))(line);
  });
  return () =>
    new Promise((resolve, reject) => {
      if (lines.length > 0) return resolve(lines.shift()!);
      const timer = setTimeout(() => reject(new Error(`${what} said nothing for ${timeoutMs / 1000} s`)), timeoutMs);
      waiting.push((line) => {
        clearTimeout(timer);
        resolve(line);
      });
    });
}
