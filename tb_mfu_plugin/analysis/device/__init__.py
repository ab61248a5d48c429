"""The device and MFU: GPU peaks, devices in a trace, dtype choice, MFU/HFU, plausibility."""
