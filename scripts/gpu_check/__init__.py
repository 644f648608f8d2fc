"""profreport's GPU acceptance check (`scripts/gpu-check`): run profreport on a CUDA machine within
a fixed time, then assert what must be true of what it wrote.

- `steps`: what runs (install, preflight, generate runs, analyze, compare, render), each bounded
  by its own timeout inside one overall budget, with its log kept;
- `evidence`: the outputs read back (run records, each trace read raw by `rawtrace`, analysis
  and comparison JSON, the rendered summary, preflight JSON);
- `checks` (`registry` and `checks_*`): pure functions over that evidence, each `ok`, `FAIL` or
  `skip` with its numbers, each holding profreport's output against a source it did not
  compute; and the summary table with each row's flags; one more check is one more function;
- `preflight`: runs on the GPU machine (versions, fusers, cuDNN, an Nsight Compute probe);
- `wheels`: what the offline machine needs carried, checked before it is carried.

Independent of profreport's own code on purpose (stdlib only, except `preflight`, which runs on
the device): what is checked is what profreport wrote, not what its code believes.
"""
