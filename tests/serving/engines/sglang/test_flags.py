"""The `sglang` backend's flags: the command lines it builds per checkpoint family, and the
spec-string parser."""

import json
import logging
from pathlib import Path

import pytest

from opencomposer.serving.engines.sglang.flags import (
    SGLangLaunch,
    SGLangLaunchError,
    build_command,
    launch_from_spec,
    read_model_config,
)

PREFIX = ("python", "-m", "sglang.launch_server")
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "num_nextn_predict_layers": 1,
}
KIMI_K2 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "kimi_k2",
    "num_nextn_predict_layers": 0,
}
KIMI_K25 = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "model_type": "kimi_k25",
    "text_config": {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "num_nextn_predict_layers": 0,
    },
}


def command(config: dict, **options) -> list[str]:
    launch = SGLangLaunch(**{"model_path": "/models/m", "port": 30000, **options})
    return build_command(launch, config, prefix=PREFIX)


def flag(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


# --------------------------------------------------------------------------- command lines


def test_deepseek_v3_with_a_nextn_layer_speculates_with_mtp() -> None:
    assert command(DEEPSEEK_V3, model_path="/models/DeepSeek-V3-0324", tp=8) == [
        *PREFIX,
        "--model-path", "/models/DeepSeek-V3-0324", "--host", "127.0.0.1", "--port", "30000",
        "--tp-size", "8",
        "--tool-call-parser", "deepseekv3",
        "--speculative-algorithm", "EAGLE",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
    ]  # fmt: skip


def test_kimi_k25_speculates_with_an_eagle3_draft() -> None:
    cmd = command(
        KIMI_K25, model_path="/models/Kimi-K2.5", tp=8,
        draft_model_path="/models/kimi-k2.5-eagle3",
    )  # fmt: skip
    assert cmd == [
        *PREFIX,
        "--model-path", "/models/Kimi-K2.5", "--host", "127.0.0.1", "--port", "30000",
        "--tp-size", "8", "--trust-remote-code",
        "--tool-call-parser", "kimi_k2", "--reasoning-parser", "kimi_k2",
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "/models/kimi-k2.5-eagle3",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
    ]  # fmt: skip


def test_kimi_without_a_draft_does_not_speculate_and_warns(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        cmd = command(KIMI_K2)
    assert not any(part.startswith("--speculative") for part in cmd)
    assert flag(cmd, "--tool-call-parser") == "kimi_k2"
    assert "--trust-remote-code" in cmd
    assert "speculative decoding is off" in caplog.text


def test_explicit_none_turns_mtp_off_quietly(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        cmd = command(DEEPSEEK_V3, speculative="none")
    assert "--speculative-algorithm" not in cmd
    assert not caplog.text


def test_parallelism_and_memory_flags() -> None:
    cmd = command(
        DEEPSEEK_V3, tp=8, dp=8, ep=8, enable_dp_attention=True, mem_fraction_static=0.85,
        context_length=65536, served_model_name="dsv3", extra_args=("--cuda-graph-max-bs", "64"),
        num_steps=1, topk=1, num_draft_tokens=2,
    )  # fmt: skip
    assert flag(cmd, "--tp-size") == "8"
    assert flag(cmd, "--dp-size") == "8"
    assert flag(cmd, "--ep-size") == "8"
    assert "--enable-dp-attention" in cmd
    assert flag(cmd, "--mem-fraction-static") == "0.85"
    assert flag(cmd, "--context-length") == "65536"
    assert flag(cmd, "--served-model-name") == "dsv3"
    assert flag(cmd, "--speculative-num-steps") == "1"
    assert flag(cmd, "--speculative-num-draft-tokens") == "2"
    assert cmd[-2:] == ["--cuda-graph-max-bs", "64"]


def test_single_gpu_defaults_leave_dp_and_ep_to_sglang() -> None:
    cmd = command({})
    assert flag(cmd, "--tp-size") == "1"
    assert "--dp-size" not in cmd and "--ep-size" not in cmd
    assert "--tool-call-parser" not in cmd and "--trust-remote-code" not in cmd


@pytest.mark.parametrize(
    ("config", "path", "tool", "reasoning"),
    [
        (DEEPSEEK_V3, "/models/dsv3", "deepseekv3", None),
        (DEEPSEEK_V3, "/models/DeepSeek-R1-0528", "deepseekv3", "deepseek-r1"),
        (DEEPSEEK_V3, "/models/DeepSeek-V3.1-Terminus", "deepseekv31", "deepseek-v3"),
        ({**DEEPSEEK_V3, "model_type": "deepseek_v32"}, "/models/x", "deepseekv32", "deepseek-v3"),
        ({**DEEPSEEK_V3, "_name_or_path": "deepseek-ai/DeepSeek-R1"}, "/m", "deepseekv3",
         "deepseek-r1"),
    ],
)  # fmt: skip
def test_parsers_follow_the_deepseek_version(config, path, tool, reasoning) -> None:
    cmd = command(config, model_path=path)
    assert flag(cmd, "--tool-call-parser") == tool
    assert flag(cmd, "--reasoning-parser") == reasoning


def test_parser_overrides_win_and_none_turns_one_off() -> None:
    cmd = command(KIMI_K25, tool_call_parser="qwen25", reasoning_parser="none")
    assert flag(cmd, "--tool-call-parser") == "qwen25"
    assert "--reasoning-parser" not in cmd


@pytest.mark.parametrize(
    ("config", "options", "message"),
    [
        (KIMI_K25, {"speculative": "eagle3"}, "needs draft_model_path"),
        (KIMI_K25, {"speculative": "mtp"}, "use speculative=eagle3"),
        ({}, {"speculative": "mtp"}, "has none"),
        (DEEPSEEK_V3, {"speculative": "mtp", "draft_model_path": "/d"}, "only used by"),
        (DEEPSEEK_V3, {"speculative": "none", "draft_model_path": "/d"}, "only used by"),
        (DEEPSEEK_V3, {"enable_dp_attention": True}, "dp >= 2"),
        (DEEPSEEK_V3, {"tp": 8, "dp": 3, "enable_dp_attention": True}, "dividing tp"),
    ],
)
def test_invalid_combinations_are_typed_errors(config, options, message) -> None:
    with pytest.raises(SGLangLaunchError, match=message) as caught:
        command(config, **options)
    assert caught.value.kind == "engine_config" and not caught.value.retryable


def test_model_config_is_read_from_the_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(DEEPSEEK_V3))
    assert read_model_config(str(tmp_path)) == DEEPSEEK_V3
    assert read_model_config("deepseek-ai/DeepSeek-V3") == {}  # a hub id: SGLang downloads it
    with pytest.raises(SGLangLaunchError, match="no checkpoint folder"):
        read_model_config(str(tmp_path / "missing"))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(SGLangLaunchError, match="cannot read it as JSON"):
        read_model_config(str(tmp_path))


# --------------------------------------------------------------------------- spec strings


def test_spec_string() -> None:
    launch = launch_from_spec(
        "sglang:/models/dsv3,tp=8,dp=8,dp_attention=true,spec=mtp,mem=0.8,context=32768,"
        "name=dsv3,port=31000,arg=--cuda-graph-max-bs,arg=64"
    )
    assert launch == SGLangLaunch(
        model_path="/models/dsv3", tp=8, dp=8, enable_dp_attention=True, speculative="mtp",
        mem_fraction_static=0.8, context_length=32768, served_model_name="dsv3", port=31000,
        extra_args=("--cuda-graph-max-bs", "64"),
    )  # fmt: skip
    kimi = launch_from_spec("sglang:/models/kimi,draft=/models/eagle3,tool_call_parser=kimi_k2")
    assert kimi.draft_model_path == "/models/eagle3" and kimi.speculative == "auto"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("vllm:/models/x", "expected sglang:MODEL_PATH"),
        ("sglang:", "expected sglang:MODEL_PATH"),
        ("/models/x", "expected sglang:MODEL_PATH"),
        ("sglang:/m,tpp=8", "did you mean 'tp'"),
        ("sglang:/m,tp", "expected key=value, got 'tp'"),
        ("sglang:/m,colour=red", "unknown key 'colour' \\(valid: arg, context"),
        ("sglang:/m,tp=eight", "tp='eight'"),
        ("sglang:/m,tp=0", "greater than or equal to 1"),
        ("sglang:/m,spec=medusa", "speculative='medusa'"),
        ("sglang:/m,tp=2,tp=4", "given twice"),
        ("sglang:/m,spec=eagle3", "needs draft_model_path"),
    ],
)
def test_bad_spec_strings_are_typed_errors(spec: str, message: str) -> None:
    with pytest.raises(SGLangLaunchError, match=message):
        launch_from_spec(spec)
