"""Our rewards driven through verl 0.9.1's own reward loop, on CPU.

verl's ``RewardLoopManager`` starts ``RewardLoopWorker`` Ray actors that load our reward function
exactly as in training (``reward.custom_reward_function.path`` + ``name`` + ``reward_kwargs``),
run the registered ``naive`` reward manager on a ``DataProto`` built from real tokenized rows
(SmolLM2 tokenizer and chat template), and assemble ``rm_scores`` plus the per-sample extra info.
We check the score lands on the last valid response token (zeros elsewhere) and that the extra-info
columns verl collects are exactly our keys and values.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import scripts

ROOT = scripts.ROOT

pytestmark = pytest.mark.slow


def compose_config(model_path: str, overrides: list[str]):
    import verl
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    cfg_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[f"actor_rollout_ref.model.path={model_path}", "reward.num_workers=2", *overrides],
        )


def make_batch(tokenizer, rows, prompt_len=96, response_len=48):
    """A DataProto shaped like a rollout batch: left-padded prompts, right-padded responses + eos."""
    from verl import DataProto

    n = len(rows)
    pad = tokenizer.pad_token_id
    prompts = torch.full((n, prompt_len), pad, dtype=torch.long)
    responses = torch.full((n, response_len), pad, dtype=torch.long)
    p_mask = torch.zeros((n, prompt_len), dtype=torch.long)
    r_mask = torch.zeros((n, response_len), dtype=torch.long)
    valid = []
    for i, row in enumerate(rows):
        p_ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)
        if not isinstance(p_ids, list):
            p_ids = p_ids["input_ids"]
        p_ids = p_ids[-prompt_len:]
        r_ids = tokenizer(row["response"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        assert len(r_ids) <= response_len, "test response too long for the fixture"
        prompts[i, prompt_len - len(p_ids) :] = torch.tensor(p_ids)
        p_mask[i, prompt_len - len(p_ids) :] = 1
        responses[i, : len(r_ids)] = torch.tensor(r_ids)
        r_mask[i, : len(r_ids)] = 1
        valid.append(len(r_ids))
    attention_mask = torch.cat([p_mask, r_mask], dim=1)
    input_ids = torch.cat([prompts, responses], dim=1)
    position_ids = torch.clamp(torch.cumsum(attention_mask, dim=1) - 1, min=0)
    data = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
        },
        non_tensors={
            "data_source": np.array([r["data_source"] for r in rows], dtype=object),
            "reward_model": np.array([{"style": "rule", "ground_truth": r["gt"]} for r in rows], dtype=object),
            "extra_info": np.array([{"index": i} for i in range(n)], dtype=object),
            "raw_prompt": np.array([r["prompt"] for r in rows], dtype=object),
        },
    )
    return data, valid


def user(text):
    return [{"role": "user", "content": text}]


CASES = {
    "pointwise": (
        "reward_fns/pointwise.py",
        [],
        [
            (
                "<think>fine</think><score>4</score>",
                4,
                {"score": 1.0, "acc": 1.0, "pred": 4, "label": 4, "format_ok": 1.0},
            ),
            (
                "<think>meh</think><score>1</score>",
                0,
                {"score": 0.0, "acc": 0.0, "pred": 1, "label": 0, "format_ok": 1.0},
            ),
            (
                "<think>ok</think><score>3</score>",
                2,
                {"score": 0.75, "acc": 0.0, "pred": 3, "label": 2, "format_ok": 1.0},
            ),
            ("I think it is a 0", 0, {"score": -1.0, "acc": 0.0, "pred": -1, "label": 0, "format_ok": 0.0}),
            (
                "<think>unclosed <score>0</score>",
                0,
                {"score": -1.0, "acc": 0.0, "pred": -1, "label": 0, "format_ok": 0.0},
            ),
        ],
    ),
    "pairwise": (
        "reward_fns/pairwise.py",
        ["+reward.custom_reward_function.reward_kwargs.format_penalty=-0.5"],
        [
            (
                "<think>x</think><better>A</better>",
                "A",
                {"score": 1.0, "acc": 1.0, "pred_a": 1.0, "label_a": 1.0, "format_ok": 1.0},
            ),
            (
                "<think>x</think><better>a</better>",
                "B",
                {"score": 0.0, "acc": 0.0, "pred_a": 1.0, "label_a": 0.0, "format_ok": 1.0},
            ),
            ("<better>tie</better>", "B", {"score": -0.5, "acc": 0.0, "pred_a": 0.0, "label_a": 0.0, "format_ok": 0.0}),
            (
                "<better>A</better><better>B</better>",
                "A",
                {"score": -0.5, "acc": 0.0, "pred_a": 0.0, "label_a": 1.0, "format_ok": 0.0},
            ),
        ],
    ),
    "gsm8k_flexible": (
        "reward_fns/gsm8k.py",
        ["+reward.custom_reward_function.reward_kwargs.mode=flexible"],
        [
            ("48 / 2 = 24, 48 + 24 = 72\n#### 72", "72", {"score": 1.0, "acc": 1.0, "format_ok": 1.0}),
            ("The answer is $1,234.", "1234", {"score": 1.0, "acc": 1.0, "format_ok": 1.0}),
            ("It is 5", "6", {"score": 0.0, "acc": 0.0, "format_ok": 1.0}),
            ("no idea", "6", {"score": 0.0, "acc": 0.0, "format_ok": 0.0}),
        ],
    ),
    "gsm8k_strict": (
        "reward_fns/gsm8k.py",
        [],
        [
            ("#### 18.00", "18", {"score": 1.0, "acc": 1.0, "format_ok": 1.0}),
            ("The answer is 18", "18", {"score": 0.0, "acc": 0.0, "format_ok": 0.0}),
        ],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_reward_through_verl_reward_loop(name, ray_cluster, model_path, tokenizer):
    from verl.experimental.reward_loop.reward_loop import RewardLoopManager

    path, extra_overrides, cases = CASES[name]
    cfg = compose_config(
        model_path,
        [
            f"reward.custom_reward_function.path={os.path.join(ROOT, path)}",
            "reward.custom_reward_function.name=compute_score",
            "reward.reward_manager.name=naive",
            *extra_overrides,
        ],
    )
    rows = [
        {"data_source": "test", "prompt": user(f"question {i}"), "response": resp, "gt": gt}
        for i, (resp, gt, _) in enumerate(cases)
    ]
    data, valid = make_batch(tokenizer, rows)
    manager = RewardLoopManager(cfg)
    try:
        out = manager.compute_rm_score(data)
    finally:
        for w in manager.reward_loop_workers:
            ray_cluster.kill(w)
    rm = out.batch["rm_scores"]
    assert rm.shape == data.batch["responses"].shape
    for i, (_, _, expected) in enumerate(cases):
        assert rm[i, valid[i] - 1].item() == pytest.approx(expected["score"])
        others = torch.cat([rm[i, : valid[i] - 1], rm[i, valid[i] :]])
        assert torch.count_nonzero(others).item() == 0
    assert out.meta_info["reward_extra_keys"] == list(cases[0][2])
    for key in cases[0][2]:
        assert out.non_tensor_batch[key].tolist() == [c[2][key] for c in cases], key
