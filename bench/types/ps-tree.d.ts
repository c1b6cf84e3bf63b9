// ps-tree 1.2 ships no types; only what bench/stop-safety uses. Rows are `ps -A -o ppid,pid,stat,comm`
// columns, as strings.
declare module 'ps-tree' {
  interface PsTreeRow {
    readonly PPID: string;
    readonly PID: string;
    readonly STAT: string;
    readonly COMMAND: string;
  }
  function psTree(pid: number | string, callback: (error: Error | null, children: readonly PsTreeRow[]) => void): void;
  export = psTree;
}
