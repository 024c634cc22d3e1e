"""WarpSAC (and FlashSAC as its `norm=True` path): SAC with a C51 critic on a fixed [-5, 5]
support, return-based reward normalization, zeta noise repetition and Sample Weight Decay replay.

Sources: Wu et al., "WarpSAC" (arXiv 2608.24479), `wzhhasadream/warprl`
`nnxrl/buffers/jax_buffer.py` (SWD) and `nnxrl/agents/flashsacnetwork.py`; FlashSAC (Kim et al.,
arXiv 2604.04539), `leeyngdo/FlashSAC` `flash_rl/agents/flashSAC/{layer,network,update}.py`.
See `specs/sac_family.md` Secs. 1.6, 1.7, 5 and 6.

Everything is a switch of the shared core in `sac.py`; this file holds WarpSAC's defaults (the
`-L` profile: normalized networks with biases, twin critics with clipped double Q, SWD over
80,000 vectorized steps). The `-A` profile (data-abundant parallel sim: normalization off, one
critic, bf16 replay observations, SWD over 2,000 steps) is a preset (`configs/sac.py`).
The released GPU presets do not set `num_q = 1`; we set it as the paper describes.
"""

from __future__ import annotations

import dataclasses

from jaxrl.agents.sac import SAC, SACConfig


@dataclasses.dataclass(frozen=True)
class WarpSACConfig(SACConfig):
    """WarpSAC-L defaults (spec Sec. 6)."""

    actor_hidden: tuple[int, ...] = (256,)
    critic_hidden: tuple[int, ...] = (256,)
    norm: bool = True
    norm_bias: bool = True
    num_blocks: int = 2
    critic_type: str = "categorical"
    num_atoms: int = 101
    v_min: float = -5.0
    v_max: float = 5.0
    num_q: int = 2
    batch_size: int = 512
    policy_delay: int = 2
    swd_decay_steps: float = 80_000.0
    normalize_observations: bool = False
    log_std_min: float = -10.0
    log_std_max: float = 2.0
    target_entropy: str = "flash"
    reward_normalization: bool = True
    noise_repeat: bool = True
    lr_schedule: str = "cosine"
    lr_final_fraction: float = 0.1
    learning_rate: float = 3e-4
    alpha_learning_rate: float = 3e-4
    tau: float = 0.005
    init_alpha: float = 0.01


@dataclasses.dataclass(frozen=True)
class WarpSAC(SAC):
    """WarpSAC / FlashSAC (off-policy): the SAC core with `WarpSACConfig` defaults."""

    config: WarpSACConfig
