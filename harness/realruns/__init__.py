"""Real runs of other agents: `imprint-rounds/1` round logs (`roundlogs`:
read, cut into replies, replayed through the stop rule, exported from a
trace), the labels that say which runs are useful and where they loop, the
files the replaying commands read (`runfiles`: traces, round logs, raw
trajectories converted in memory), novelty configs by `NoveltyConfig`'s
field names (`noveltyconfigs`), and the store of regression runs
(`regressionstore`: `imprint regress add`).

`importers/` holds the converters from other agents' logs."""
