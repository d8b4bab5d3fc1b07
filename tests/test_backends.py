"""Backend selection and the launch validation both backends share."""

import pytest

from grader.backends import ENV_VAR, select_backend
from grader.backends.base import Dim3, validate_launch
from grader.errors import BackendUnavailable, LaunchError, UsageError
from tests.conftest import gpu_available


def test_the_option_beats_the_environment_which_beats_the_config():
    s = select_backend("emulator", config_value="pycuda", env={ENV_VAR: "pycuda"})
    assert (s.name, s.reason) == ("emulator", "--backend option")
    s = select_backend(None, config_value="pycuda", env={ENV_VAR: "emulator"})
    assert (s.name, s.reason) == ("emulator", f"{ENV_VAR} environment variable")
    s = select_backend("auto", config_value="emulator", env={})
    assert (s.name, s.reason) == ("emulator", "config key 'backend'")


def test_auto_says_why_it_chose():
    s = select_backend(None, env={})
    ok, why = gpu_available()
    assert s.name == ("pycuda" if ok else "emulator")
    assert s.reason.startswith("auto:") and why in s.reason


def test_an_unknown_backend_names_its_source():
    with pytest.raises(UsageError, match=f"'opencl' from the {ENV_VAR} environment variable"):
        select_backend(None, env={ENV_VAR: "opencl"})


@pytest.mark.skipif(gpu_available()[0], reason="this machine has a GPU")
def test_asking_for_pycuda_without_a_gpu_explains_and_points_to_the_emulator():
    with pytest.raises(BackendUnavailable, match="--backend emulator"):
        select_backend("pycuda", env={})


@pytest.mark.parametrize("grid, block, shared, words", [
    (1, 1025, 0, "block.x = 1025 exceeds the limit 1024"),
    (1, (32, 32, 2), 0, "2048 threads per block"),
    (1, (1, 1, 65), 0, "block.z = 65 exceeds the limit 64"),
    ((1, 65536), 32, 0, "grid.y = 65536 exceeds the limit 65535"),
    (0, 32, 0, "grid.x must be at least 1"),
    (1, 32, 48 * 1024 + 1, "49153 bytes of dynamic shared memory exceeds the limit of 49152"),
    (1, "32", 0, "block must be an int or a tuple of up to 3 ints (got '32')"),
    ((1, 2, 3, 4), 32, 0, "grid must be an int or a tuple of up to 3 ints"),
])
def test_bad_launches_are_refused_with_the_limit(grid, block, shared, words):
    with pytest.raises(LaunchError) as info:
        validate_launch(kernel="k", grid=grid, block=block, shared_bytes=shared)
    assert str(info.value).startswith("launch of k: ") and words in str(info.value)


def test_a_good_launch_is_normalised_to_dim3():
    assert validate_launch(kernel="k", grid=(4, 2), block=256, shared_bytes=1024) == (Dim3(4, 2, 1), Dim3(256, 1, 1))
