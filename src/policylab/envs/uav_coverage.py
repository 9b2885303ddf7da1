"""A multi-UAV coverage testbed (papers/seed_control_theory.md §12.2, ours): mission UAVs
with batteries collect data from points of interest (PoIs) while charging UAVs keep them
flying; numpy, batched over B independent episodes, and a PettingZoo-parallel-shaped
wrapper (§0.4) without the dependency.

Dynamics per step (every number a knob, defaults [ours]):
  position  p ← clip(p + max_speed·clip(a, −1, 1), 0, 1)       (a mission UAV with an
            empty battery cannot move)
  battery   b ← max(b − drain_step − drain_move·|Δp|, 0)         (mission UAVs only)
  charging  every mission UAV within charge_radius of a charger gains charge_rate (≤ 1)
  data      every live mission UAV takes min(left, collect_rate) from each PoI within
            collect_radius
  reward    a mission UAV: 10 × (data it took) / (data present); a charger: 10·Δcoverage
            of the team + charge_bonus·(energy charged) (per-agent rewards, as MADDPG
            allows; our split)
Metrics: coverage = data collected / data present; Jain fairness (Σx)²/(nΣx²) over the
per-PoI collected fraction x (§12.1); charging efficiency = energy charged / energy the
mission UAVs spent (our reading of "charging efficiency": the share of spent energy the
chargers replaced).

Observations are local views of a heterogeneous graph, padded to fixed maxima so an MLP can
read them and a graph encoder can drop the padding:
  self   [x, y, battery, is_mission, is_charger]                                  5
  agents max_agents − 1 slots of [dx, dy, battery, is_mission, is_charger, present] 6 each
  PoIs   max_pois slots of [dx, dy, data left, present]                            4 each
An entity farther than sense_radius is absent (present = 0, features 0)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

SELF, AGENT, POI = 5, 6, 4  # feature widths of the three node kinds


@dataclass(frozen=True)
class UAVConfig:
    n_mission: int = 3
    n_charger: int = 1
    n_poi: int = 30
    horizon: int = 100
    max_speed: float = 0.03
    collect_radius: float = 0.06
    collect_rate: float = 0.1
    charge_radius: float = 0.15
    charge_rate: float = 0.05
    drain_step: float = 0.004
    drain_move: float = 0.3
    charge_bonus: float = 0.5
    sense_radius: float = 1.5  # the whole square: the paper's local radius is not given
    max_agents: int = 6  # padding: 5 mission + 1 charger (the held-out counts)
    max_pois: int = 50

    def __post_init__(self) -> None:
        for name in ("n_mission", "n_charger", "n_poi", "horizon"):
            if getattr(self, name) < 1:
                raise ValueError(f"uav_coverage: {name}={getattr(self, name)}; accepted: >= 1")
        if self.n_mission + self.n_charger > self.max_agents:
            raise ValueError(
                f"uav_coverage: n_mission + n_charger = {self.n_mission + self.n_charger} > "
                f"max_agents={self.max_agents}; accepted: at most max_agents"
            )
        if self.n_poi > self.max_pois:
            raise ValueError(
                f"uav_coverage: n_poi={self.n_poi} > max_pois={self.max_pois}; accepted: "
                "at most max_pois"
            )

    @property
    def n_agents(self) -> int:
        return self.n_mission + self.n_charger

    @property
    def obs_dim(self) -> int:
        return SELF + (self.max_agents - 1) * AGENT + self.max_pois * POI


def jain(x: np.ndarray | torch.Tensor, axis: int = -1):
    """Jain's fairness index (Σx)²/(n·Σx²) along `axis` (Jain, Chiu, Hawe 1984; §12.1):
    1 when all equal, 1/n when one takes all; 0 for all zeros (no coverage scores no
    fairness, our choice)."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[axis]
    num, den = x.sum(axis) ** 2, n * (x**2).sum(axis)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)


def split_obs(obs, max_agents: int, max_pois: int):
    """(self [.., 5], agents [.., max_agents − 1, 6], PoIs [.., max_pois, 4]) of padded
    observations [.., obs_dim]; numpy arrays or torch tensors."""
    a_end = SELF + (max_agents - 1) * AGENT
    lead = obs.shape[:-1]
    agents = obs[..., SELF:a_end].reshape(*lead, max_agents - 1, AGENT)
    pois = obs[..., a_end : a_end + max_pois * POI].reshape(*lead, max_pois, POI)
    return obs[..., :SELF], agents, pois


def scripted_actions(obs: np.ndarray, cfg: UAVConfig, low_battery: float = 0.3) -> np.ndarray:
    """The reference policy of §12.2, from each agent's own observation: a mission UAV flies
    to the nearest PoI with data left, or to the nearest charger below `low_battery`; a
    charger flies to the mission UAV with the lowest battery it sees (ours). obs
    [.., obs_dim] → actions [.., 2] (unit direction, full speed)."""
    me, agents, pois = split_obs(obs, cfg.max_agents, cfg.max_pois)
    big = 1e9
    d_poi = np.linalg.norm(pois[..., :2], axis=-1)
    d_poi = np.where((pois[..., 3] > 0) & (pois[..., 2] > 1e-6), d_poi, big)
    target_poi = np.take_along_axis(pois[..., :2], d_poi.argmin(-1)[..., None, None], -2)[..., 0, :]
    target_poi = target_poi * (d_poi.min(-1) < big)[..., None]
    present = agents[..., 5] > 0
    d_ch = np.linalg.norm(agents[..., :2], axis=-1)
    d_ch = np.where(present & (agents[..., 4] > 0), d_ch, big)
    target_ch = np.take_along_axis(agents[..., :2], d_ch.argmin(-1)[..., None, None], -2)[..., 0, :]
    target_ch = target_ch * (d_ch.min(-1) < big)[..., None]
    need = np.where(present & (agents[..., 3] > 0), agents[..., 2], big)
    target_m = np.take_along_axis(agents[..., :2], need.argmin(-1)[..., None, None], -2)[..., 0, :]
    target_m = target_m * (need.min(-1) < big)[..., None]
    mission = me[..., 3:4] > 0
    go_charge = me[..., 2:3] < low_battery
    target = np.where(mission, np.where(go_charge, target_ch, target_poi), target_m)
    norm = np.linalg.norm(target, axis=-1, keepdims=True)
    # full speed, but do not overshoot a target closer than one step
    speed = np.minimum(norm / cfg.max_speed, 1.0)
    return np.where(norm > 1e-9, target / np.maximum(norm, 1e-9) * speed, 0.0)


class UAVCoverage:
    """B episodes at once. State (numpy float64): pos [B, N, 2], battery [B, N], poi
    [B, P, 2], left [B, P], data [B, P], t, plus energy tallies. Agents 0..n_mission−1 are
    mission UAVs, the rest chargers. Random draws come from a passed torch.Generator, so
    the state plus that generator reproduce an episode (checkpoints, resume)."""

    def __init__(self, cfg: UAVConfig, batch: int) -> None:
        self.cfg, self.batch = cfg, batch
        self.is_mission = np.arange(cfg.n_agents) < cfg.n_mission

    # -- state ------------------------------------------------------------------------
    def reset(self, generator: torch.Generator) -> np.ndarray:
        c, b = self.cfg, self.batch
        draw = torch.rand(b, c.n_agents * 2 + c.n_poi * 3, generator=generator, dtype=torch.float64)
        draw = draw.numpy()
        self.pos = 0.4 + 0.2 * draw[:, : c.n_agents * 2].reshape(b, c.n_agents, 2)
        rest = draw[:, c.n_agents * 2 :]
        self.poi = rest[:, : c.n_poi * 2].reshape(b, c.n_poi, 2)
        self.data = 0.5 + rest[:, c.n_poi * 2 :]  # U(0.5, 1.5) data per PoI
        self.left = self.data.copy()
        self.battery = np.ones((b, c.n_agents))
        self.t = 0
        self.spent = np.zeros(b)  # mission energy used
        self.charged = np.zeros(b)  # energy delivered by chargers
        return self.observe()

    def state_dict(self) -> dict[str, torch.Tensor]:
        keys = ("pos", "poi", "data", "left", "battery", "spent", "charged")
        return {k: torch.from_numpy(getattr(self, k).copy()) for k in keys} | {
            "t": torch.tensor(self.t)
        }

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for key, value in state.items():
            setattr(self, key, int(value) if key == "t" else value.numpy().copy())

    # -- dynamics -----------------------------------------------------------------------
    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """actions [B, N, 2] in [−1, 1] → (observations [B, N, obs_dim], rewards [B, N],
        done). Every episode has the same horizon, so they end together."""
        c = self.cfg
        alive = (self.battery > 0) | ~self.is_mission
        move = c.max_speed * np.clip(actions, -1.0, 1.0) * alive[..., None]
        new = np.clip(self.pos + move, 0.0, 1.0)
        dist = np.linalg.norm(new - self.pos, axis=-1)
        self.pos = new
        before = self.battery.copy()
        drain = (c.drain_step + c.drain_move * dist) * self.is_mission
        self.battery = np.maximum(self.battery - drain, 0.0)
        self.spent += (before - self.battery)[:, self.is_mission].sum(-1)
        # chargers top up mission UAVs in reach
        m, ch = self.pos[:, self.is_mission], self.pos[:, ~self.is_mission]
        near = np.linalg.norm(m[:, :, None] - ch[:, None], axis=-1) <= c.charge_radius
        gain = np.minimum(c.charge_rate * near.sum(-1), 1.0 - self.battery[:, self.is_mission])
        gain = gain * (self.battery[:, self.is_mission] > 0)  # an empty UAV has landed
        self.battery[:, self.is_mission] += gain
        charged = gain.sum(-1)
        self.charged += charged
        # live mission UAVs collect from PoIs in reach
        live = self.battery[:, self.is_mission] > 0
        reach = np.linalg.norm(m[:, :, None] - self.poi[:, None], axis=-1) <= c.collect_radius
        taking = reach & live[..., None]  # [B, M, P]
        takers = taking.sum(1)  # [B, P]
        take = np.minimum(self.left, c.collect_rate * takers)
        self.left = self.left - take
        # a mission UAV is paid its share of what it took; a charger, the team's take and
        # the energy it charged
        share = (taking * (take / np.maximum(takers, 1))[:, None]).sum(-1)  # [B, M]
        total = self.data.sum(-1, keepdims=True)
        reward = np.empty(self.battery.shape)
        reward[:, self.is_mission] = 10.0 * share / total
        team = 10.0 * take.sum(-1) / total[:, 0] + c.charge_bonus * charged
        reward[:, ~self.is_mission] = team[:, None]
        self.t += 1
        return self.observe(), reward, self.t >= c.horizon

    # -- observations and metrics ---------------------------------------------------------
    def observe(self) -> np.ndarray:
        c, b, n = self.cfg, self.batch, self.cfg.n_agents
        kind = np.stack([self.is_mission, ~self.is_mission], -1).astype(np.float64)  # [N, 2]
        obs = np.zeros((b, n, c.obs_dim))
        obs[..., :2] = self.pos
        obs[..., 2] = self.battery
        obs[..., 3:5] = kind
        # other agents, in index order without self
        rel = self.pos[:, None] - self.pos[:, :, None]  # [B, i, j, 2] = p_j − p_i
        seen = np.linalg.norm(rel, axis=-1) <= c.sense_radius
        feats = (
            np.concatenate(
                [
                    rel,
                    np.broadcast_to(self.battery[:, None, :, None], (b, n, n, 1)),
                    np.broadcast_to(kind[None, None], (b, n, n, 2)),
                    np.ones((b, n, n, 1)),
                ],
                -1,
            )
            * seen[..., None]
        )
        others = ~np.eye(n, dtype=bool)
        start = SELF
        for i in range(n):
            block = feats[:, i, others[i]].reshape(b, -1)
            obs[:, i, start : start + block.shape[1]] = block
        start = SELF + (c.max_agents - 1) * AGENT
        rel = self.poi[:, None] - self.pos[:, :, None]  # [B, N, P, 2]
        seen = np.linalg.norm(rel, axis=-1) <= c.sense_radius
        left = np.broadcast_to(self.left[:, None, :, None], rel.shape[:3] + (1,))
        poi = np.concatenate([rel, left, np.ones_like(left)], -1) * seen[..., None]
        obs[..., start : start + c.n_poi * POI] = poi.reshape(b, n, -1)
        return obs

    def metrics(self) -> dict[str, np.ndarray]:
        """Per episode [B]: coverage, Jain fairness of per-PoI collected fractions,
        charging efficiency (energy charged / mission energy spent)."""
        collected = 1.0 - self.left / self.data
        return {
            "coverage": (self.data - self.left).sum(-1) / self.data.sum(-1),
            "jain": jain(collected),
            "charge_eff": self.charged / np.maximum(self.spent, 1e-12),
        }


class ParallelUAVCoverage:
    """The PettingZoo parallel API for one episode, without the dependency (§0.4):
    `possible_agents`, `reset(seed) -> (obs, infos)`, `step(actions) -> (obs, rewards,
    terminations, truncations, infos)`, dicts keyed by agent name ("mission_0",
    "charger_0"); `infos[name]["agent_type"]` is "mission" or "charger"."""

    def __init__(self, cfg: UAVConfig | None = None) -> None:
        self.cfg = cfg or UAVConfig()
        self.env = UAVCoverage(self.cfg, 1)
        c = self.cfg
        self.types = ["mission"] * c.n_mission + ["charger"] * c.n_charger
        counts: dict[str, int] = {}
        self.possible_agents = []
        for kind in self.types:
            self.possible_agents.append(f"{kind}_{counts.get(kind, 0)}")
            counts[kind] = counts.get(kind, 0) + 1
        self.agents: list[str] = []

    def _dicts(self, obs: np.ndarray):
        return (
            {a: obs[0, i] for i, a in enumerate(self.possible_agents)},
            {a: {"agent_type": t} for a, t in zip(self.possible_agents, self.types, strict=True)},
        )

    def reset(self, seed: int | None = None):
        obs = self.env.reset(torch.Generator().manual_seed(0 if seed is None else seed))
        self.agents = list(self.possible_agents)
        return self._dicts(obs)

    def step(self, actions: dict[str, np.ndarray]):
        stacked = np.stack([np.asarray(actions[a], dtype=np.float64) for a in self.agents])
        obs, reward, done = self.env.step(stacked[None])
        obs_d, infos = self._dicts(obs)
        rewards = {a: float(reward[0, i]) for i, a in enumerate(self.agents)}
        terms = {a: False for a in self.agents}
        truncs = {a: bool(done) for a in self.agents}
        if done:
            self.agents = []
        return obs_d, rewards, terms, truncs, infos
