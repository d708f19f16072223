"""Traces and round logs read back (`frames.load_frames`, the one loader)
for the report, the tuner and the release gate."""
