"""Prompt-robustness tools: BREPS box and free-form gesture attacks (breps/).

RClicks (clickability maps, clicking groups, Sample NoC / ΔSB / ΔGR / NSR) has no module yet.
"""
