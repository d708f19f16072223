"""Real runs of other agents: `imprint-rounds/1` round logs (read, cut into
replies, replayed through the stop rule, exported from a trace) and the
labels that say which runs are useful and where they loop.

`importers/` is kept free for converters from other agents' logs."""
