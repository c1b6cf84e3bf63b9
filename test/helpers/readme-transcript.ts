// The README's console transcripts as a test replays them: each `$ ` line is a command, the lines
// under it its output. Run ids and times differ from run to run, so an expected line is a pattern:
// a run id seen for the first time is bound to the one the real output printed there, and later
// commands get the bound id; a time matches any time; runs of blanks match any blanks.

export interface TranscriptCommand {
  readonly command: string;
  readonly expected: readonly string[];
}

export interface TranscriptBlock {
  /** `background`: the block's one command keeps running while the next blocks run (a second terminal). */
  readonly mode: 'foreground' | 'background';
  readonly commands: readonly TranscriptCommand[];
}

/** The text of the section under `## <title>`, up to the next `## ` heading. */
export function sectionOf(markdown: string, title: string): string {
  const start = markdown.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`no section "## ${title}"`);
  const end = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, end < 0 ? undefined : end);
}

/** The fenced blocks of one language in a section, in order. */
export function fencedBlocks(section: string, language: string): string[] {
  return [...section.matchAll(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``, 'g'))].map(
    (match) => match[1] ?? '',
  );
}

/** The console blocks of a section; `<!-- readme-test: background -->` just before one marks it. */
export function transcriptBlocks(section: string): TranscriptBlock[] {
  return [...section.matchAll(/(<!-- readme-test: (\w+) -->\n)?```console\n([\s\S]*?)```/g)].map((match) => ({
    mode: match[2] === 'background' ? 'background' : 'foreground',
    commands: commandsOf(match[3] ?? ''),
  }));
}

function commandsOf(block: string): TranscriptCommand[] {
  const commands: Array<{ command: string; expected: string[] }> = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('$ ')) commands.push({ command: line.slice(2), expected: [] });
    else if (line.trim() !== '') commands.at(-1)?.expected.push(line);
  }
  return commands;
}

const RUN_ID = /run-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;
const TOKEN = new RegExp(`(${RUN_ID.source})|(\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z)|(\\s+)`, 'g');

/** README run id → the real run id it stands for. */
export type IdBindings = Map<string, string>;

/** A command with every README run id already bound replaced by its real one. */
export function boundCommand(command: string, ids: IdBindings): string {
  return command.replace(new RegExp(RUN_ID.source, 'g'), (id) => ids.get(id) ?? id);
}

/** The pattern of one expected line, and the README ids it would bind, in capture order. */
function linePattern(expected: string, ids: IdBindings): { pattern: RegExp; binds: string[] } {
  const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const binds: string[] = [];
  let source = '';
  let at = 0;
  for (const match of expected.trimEnd().matchAll(TOKEN)) {
    source += escape(expected.slice(at, match.index));
    at = match.index + match[0].length;
    if (match[1] !== undefined) {
      const bound = ids.get(match[1]);
      if (bound !== undefined) source += escape(bound);
      else if (binds.includes(match[1])) source += `\\k<id${binds.indexOf(match[1])}>`;
      else {
        source += `(?<id${binds.length}>${RUN_ID.source})`;
        binds.push(match[1]);
      }
    } else if (match[2] !== undefined) source += '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z';
    else source += '\\s+';
  }
  source += escape(expected.trimEnd().slice(at));
  return { pattern: new RegExp(`^${source}$`), binds };
}

/**
 * Matches the expected lines against the real output: each expected line, in order, takes the
 * first real line not taken yet that fits (a job's own output and pidfence's may interleave), and
 * binds the ids it names. Returns what did not match: expected lines nothing fitted, and real
 * lines left over (the README must show all of the output).
 */
export function matchOutput(
  expected: readonly string[],
  actual: string,
  ids: IdBindings,
): { missing: string[]; extra: string[] } {
  const lines = actual
    .split('\n')
    .map((line) => line.trimEnd())
    .filter((line) => line !== '');
  const taken = new Set<number>();
  const missing: string[] = [];
  for (const line of expected) {
    const { pattern, binds } = linePattern(line, ids);
    const index = lines.findIndex((candidate, i) => !taken.has(i) && pattern.test(candidate));
    if (index < 0) {
      missing.push(line);
      continue;
    }
    taken.add(index);
    const groups = pattern.exec(lines[index] ?? '')?.groups ?? {};
    binds.forEach((id, i) => ids.set(id, groups[`id${i}`] ?? id));
  }
  return { missing, extra: lines.filter((_, i) => !taken.has(i)) };
}
