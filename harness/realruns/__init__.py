"""Real runs of other agents: `imprint-rounds/1` round logs (read, cut into
replies, replayed through the stop rule, exported from a trace), the labels
that say which runs are useful and where they loop, the files the replaying
commands read (`sources`: traces, round logs, raw trajectories converted in
memory), `NoveltyConfig`'s fields by name (`noveltyfields`), and the store of
regression runs (`regressions`: `imprint regress add`).

`importers/` holds the converters from other agents' logs."""
