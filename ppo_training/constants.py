"""Constants of the official TinyPhysics simulator (see SPEC.md of the challenge assets).

Every value here is part of the scoring rules; changing one makes costs incomparable
with the official harness.
"""
ACC_G = 9.81                      # m/s^2, converts road roll (rad) to lateral acceleration
CONTEXT_LENGTH = 20               # steps of history the model sees
VOCAB_SIZE = 1024                 # lateral-acceleration tokens
LATACCEL_RANGE = (-5.0, 5.0)      # m/s^2, tokenizer range
STEER_RANGE = (-2.0, 2.0)         # actions are clipped to this
MAX_ACC_DELTA = 0.5               # m/s^2, largest change of lataccel per step
DEL_T = 0.1                       # s, 10 Hz
CONTROL_START_IDX = 100           # before this step the logged steer is applied
COST_END_IDX = 500                # steps >= this do not count
FUTURE_PLAN_STEPS = 50            # the plan at step i holds rows i+1 .. i+49
LAT_ACCEL_COST_MULTIPLIER = 50.0
TEMPERATURE = 0.8                 # sampling temperature of the model's softmax

#: Smallest segment length that covers the whole cost window.
MIN_SEGMENT_ROWS = COST_END_IDX
