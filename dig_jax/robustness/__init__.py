"""Prompt-robustness tools: BREPS box attacks (breps/) and realistic clicks (rclicks/)."""
