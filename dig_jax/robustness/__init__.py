"""Prompt-robustness tools: BREPS box and free-form gesture attacks (breps/) and RClicks
realistic clicks — clickability maps, clicking groups G1..G10, the multi-round protocol and
Sample NoC / ΔSB / ΔGR / NSR (rclicks/)."""
