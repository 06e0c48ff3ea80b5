"""Policies: the VLM agent, a task's scripted oracle, a replay of a stored episode, a
person acting through the app, and random actions. Each answers one Decision per screen."""

from agents.policies.base import Decision, Policy, PolicyError
from agents.policies.human import HumanPolicy
from agents.policies.oracle import OraclePolicy
from agents.policies.random_actions import RandomPolicy
from agents.policies.replay import ReplayPolicy
from agents.policies.vlm import VLMPolicy, VLMPolicyConfig

__all__ = ["Decision", "HumanPolicy", "OraclePolicy", "Policy", "PolicyError",
           "RandomPolicy", "ReplayPolicy", "VLMPolicy", "VLMPolicyConfig"]
