// Preloaded into each timed CLI process (`node -r`): on exit, writes the process's own CPU time
// and peak memory to stderr as one line, so that the bench can tell the CLI's cost apart from
// time spent waiting for a core on a busy machine.
'use strict';
process.on('exit', () => {
  const usage = process.resourceUsage();
  process.stderr.write(
    `\nFIRE_ONCE_BENCH_USAGE ${JSON.stringify({ cpuMs: Math.round((usage.userCPUTime + usage.systemCPUTime) / 1000), maxRssKb: usage.maxRSS })}\n`,
  );
});
