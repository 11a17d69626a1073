"""Training: traces to datasets, continued pretraining with MTP self-distillation, SFT and
asynchronous RL, all driving the real agent runtime and tool harness.
"""
