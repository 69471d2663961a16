"""The lab: what drives many runs and reads their folders (studies, the tuner, benchmarks, the gait check,
progress watching, reports). It may import the loop and the parts; nothing in the loop imports it."""
