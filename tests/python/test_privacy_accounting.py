"""fedagg.privacy_accounting against dp-accounting itself: epsilon after each round with the RDP and PLD accountants, for Poisson and fixed-size sampling, equal to
the library's own accountants composing the same events (built here, independently, for
several inputs, and the plain Gaussian mechanism where every client takes part); epsilon
grows with the rounds and the sampling rate and shrinks with the noise; the calibrated
noise multiplier spends the target epsilon within 1%; refusals (ValueError, saying what
to fix); `import fedagg` without the library; and the command line
(python -m fedagg.privacy_accounting) run as a process; and the control API's
privacy_spent over a sequence of private aggregations at a live root.
privacy_accounting_test.sh runs this file in .venv-privacy (dp-accounting pinned by
scripts/setup.sh) and sets FEDAGG_REQUIRE_DP_ACCOUNTING=1, so that a missing library fails
there; elsewhere (python_client_test.sh's environment) the file is skipped, saying why."""
import os
import re
import subprocess
import sys

import pytest

if os.environ.get("FEDAGG_REQUIRE_DP_ACCOUNTING") == "1":
    import dp_accounting
else:
    dp_accounting = pytest.importorskip(
        "dp_accounting", reason="dp-accounting is not installed (scripts/setup.sh installs it into .venv-privacy; "
                                "tests/python/privacy_accounting_test.sh runs this file there)")
import fedagg  # noqa: E402
from fedagg import privacy_accounting as pa  # noqa: E402

DELTA = 1e-5


def library_epsilon(z, sampling, rounds, delta, accountant):
    """The library's own figure: its accountant composing `rounds` sampled Gaussian rounds."""
    gaussian = dp_accounting.GaussianDpEvent(z)
    if sampling.kind == pa.POISSON:
        event = dp_accounting.PoissonSampledDpEvent(sampling.probability, gaussian)
        relation = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    else:
        event = dp_accounting.SampledWithoutReplacementDpEvent(sampling.population, sampling.clients, gaussian)
        relation = dp_accounting.NeighboringRelation.REPLACE_ONE
    library = (dp_accounting.rdp.RdpAccountant(neighboring_relation=relation) if accountant == pa.RDP
               else dp_accounting.pld.PLDAccountant(neighboring_relation=relation))
    library.compose(dp_accounting.SelfComposedDpEvent(event, rounds))
    return library.get_epsilon(delta)


@pytest.mark.parametrize("sampling, accountant", [
    (pa.Sampling.poisson(0.05), pa.RDP), (pa.Sampling.poisson(0.05), pa.PLD),
    (pa.Sampling.fixed_size(10, 200), pa.RDP)])
def test_epsilon_after_each_round_is_the_librarys(sampling, accountant):
    spent = pa.PrivacyAccountant(1.2, sampling, DELTA, accountant)
    assert spent.epsilon() == 0.0  # no round, nothing released
    after = spent.epsilons(5)
    assert spent.rounds == 5 and spent.epsilon() == after[-1]
    for rounds, eps in enumerate(after, start=1):
        assert eps == pytest.approx(library_epsilon(1.2, sampling, rounds, DELTA, accountant), rel=1e-9)
    assert 0.3 < after[0] and all(a < b for a, b in zip(after, after[1:])), after  # every round spends more


@pytest.mark.parametrize("z, sampling, rounds, delta", [
    (0.8, pa.Sampling.poisson(0.01), 300, 1e-6), (3.0, pa.Sampling.poisson(0.5), 40, 1e-3),
    (1.0, pa.Sampling.fixed_size(1, 10_000), 1000, 1e-7), (0.6, pa.Sampling.fixed_size(64, 100), 7, 0.01)])
def test_many_rounds_at_once_is_the_librarys(z, sampling, rounds, delta):
    spent = pa.PrivacyAccountant(z, sampling, delta)
    eps = spent.record_round(rounds)
    assert spent.rounds == rounds and eps > 0
    assert eps == pytest.approx(library_epsilon(z, sampling, rounds, delta, pa.RDP), rel=1e-9)
    assert pa.epsilon(z, sampling, rounds, delta) == eps
    assert spent.record_round(0) == eps and spent.rounds == rounds


@pytest.mark.parametrize("accountant", [pa.RDP, pa.PLD])
def test_every_client_each_round_is_the_plain_gaussian_mechanism(accountant):
    # Sampling rate 1: the round is the Gaussian mechanism alone, which the library accounts
    # without any sampling.
    library = (dp_accounting.rdp.RdpAccountant() if accountant == pa.RDP else dp_accounting.pld.PLDAccountant())
    library.compose(dp_accounting.GaussianDpEvent(2.0), 3)
    assert pa.epsilon(2.0, pa.Sampling.poisson(1.0), 3, DELTA, accountant) == pytest.approx(
        library.get_epsilon(DELTA), rel=1e-6)


def test_epsilon_moves_the_way_privacy_does():
    base = pa.epsilon(1.0, pa.Sampling.poisson(0.02), 50, DELTA)
    assert pa.epsilon(2.0, pa.Sampling.poisson(0.02), 50, DELTA) < base  # more noise, less spent
    assert pa.epsilon(1.0, pa.Sampling.poisson(0.04), 50, DELTA) > base  # more clients a round, more
    assert pa.epsilon(1.0, pa.Sampling.poisson(0.02), 100, DELTA) > base  # more rounds, more
    assert pa.epsilon(1.0, pa.Sampling.poisson(0.02), 50, 1e-8) > base  # smaller delta, larger epsilon
    assert pa.epsilon(1.0, pa.Sampling.poisson(0.02), 50, DELTA, pa.PLD) < base  # PLD is the tighter


@pytest.mark.parametrize("sampling, accountant", [
    (pa.Sampling.fixed_size(100, 1000), pa.RDP), (pa.Sampling.poisson(0.1), pa.RDP),
    (pa.Sampling.poisson(0.1), pa.PLD)])
def test_the_calibrated_noise_spends_the_target_epsilon(sampling, accountant):
    z = pa.calibrate_noise_multiplier(8.0, sampling, 20, DELTA, accountant)
    spent = pa.epsilon(z, sampling, 20, DELTA, accountant)
    assert spent <= 8.0 and spent == pytest.approx(8.0, rel=0.01), (z, spent)
    assert spent == pytest.approx(library_epsilon(z, sampling, 20, DELTA, accountant), rel=1e-9)
    assert pa.epsilon(z * 0.99, sampling, 20, DELTA, accountant) > 8.0  # not more noise than needed


def test_a_target_out_of_reach_is_refused():
    with pytest.raises(ValueError, match="does not constrain the noise; choose a smaller target epsilon"):
        pa.calibrate_noise_multiplier(1e6, pa.Sampling.poisson(1e-4), 1, 0.5)
    with pytest.raises(ValueError, match="spends more than epsilon 1e-06 after 1000 rounds.*choose a larger target"):
        pa.calibrate_noise_multiplier(1e-6, pa.Sampling.poisson(1.0), 1000, DELTA)


@pytest.mark.parametrize("make, message", [
    (lambda: pa.PrivacyAccountant(-1.0, pa.Sampling.poisson(0.1), DELTA), "noise multiplier must be > 0, not -1"),
    (lambda: pa.PrivacyAccountant(0.0, pa.Sampling.poisson(0.1), DELTA), "no finite epsilon"),
    (lambda: pa.PrivacyAccountant(float("nan"), pa.Sampling.poisson(0.1), DELTA), "must be a finite number"),
    (lambda: pa.PrivacyAccountant("lots", pa.Sampling.poisson(0.1), DELTA), "must be a number, not 'lots'"),
    (lambda: pa.PrivacyAccountant(1.0, pa.Sampling.poisson(0.1), 1.5), "delta must be in (0, 1), not 1.5"),
    (lambda: pa.PrivacyAccountant(1.0, pa.Sampling.poisson(0.1), 0), "delta must be in (0, 1), not 0"),
    (lambda: pa.PrivacyAccountant(1.0, pa.Sampling.poisson(0.1), 1), "delta must be in (0, 1), not 1"),
    (lambda: pa.PrivacyAccountant(1.0, 0.1, DELTA), "sampling must be Sampling.poisson(q)"),
    (lambda: pa.PrivacyAccountant(1.0, pa.Sampling.poisson(0.1), DELTA, "moments"), "use 'rdp' or 'pld'"),
    (lambda: pa.Sampling.poisson(0), "sampling rate must be in (0, 1], not 0"),
    (lambda: pa.Sampling.poisson(1.5), "sampling rate must be in (0, 1], not 1.5"),
    (lambda: pa.Sampling.poisson(-0.1), "sampling rate must be in (0, 1], not -0.1"),
    (lambda: pa.Sampling.fixed_size(11, 10), "takes 1 to 10 clients"),
    (lambda: pa.Sampling.fixed_size(0, 10), "clients per round must be at least 1"),
    (lambda: pa.Sampling.fixed_size(2.5, 10), "clients per round must be a whole number"),
    (lambda: pa.Sampling(pa.POISSON, probability=2), "sampling rate must be in (0, 1], not 2"),
    (lambda: pa.Sampling("with_replacement"), "unknown sampling 'with_replacement'"),
    (lambda: pa.PrivacyAccountant(1.0, pa.Sampling.fixed_size(5, 10), DELTA, pa.PLD), "Poisson sampling only"),
    (lambda: pa.PrivacyAccountant(1.0, pa.Sampling.poisson(0.1), DELTA).record_round(-1), "at least 0, not -1"),
    (lambda: pa.calibrate_noise_multiplier(-1, pa.Sampling.poisson(0.1), 10, DELTA), "target epsilon must be > 0"),
    (lambda: pa.calibrate_noise_multiplier(1, pa.Sampling.poisson(0.1), 0, DELTA), "at least 1, not 0"),
    (lambda: pa.calibrate_noise_multiplier(1, pa.Sampling.fixed_size(1, 2), 5, DELTA, pa.PLD), "Poisson sampling only"),
])
def test_what_cannot_be_accounted_is_refused(make, message):
    with pytest.raises(ValueError) as refused:
        make()
    assert message in str(refused.value)


def python(*args, **kwargs):
    """This interpreter, in a fresh process with this one's environment (PYTHONPATH)."""
    return subprocess.run([sys.executable, "-W", "error::RuntimeWarning", *args], capture_output=True,
                          text=True, timeout=300, **kwargs)


def test_fedagg_imports_without_dp_accounting():
    script = ("import sys; sys.modules['dp_accounting'] = None\n"  # any import of it now fails
              "import fedagg, fedagg.privacy_accounting as pa\n"
              "assert fedagg.PrivacyAccountant is pa.PrivacyAccountant and fedagg.Sampling is pa.Sampling\n"
              "sampling = fedagg.Sampling.poisson(0.1)\n"
              "try:\n"
              "    fedagg.PrivacyAccountant(1.0, sampling, 1e-5)\n"
              "except ImportError as e:\n"
              "    print(e)\n")
    run = python("-c", script)
    assert run.returncode == 0, run.stderr
    assert "needs Google's dp-accounting package" in run.stdout and "pip install" in run.stdout, run.stdout
    run = python("-c", "import sys, fedagg; fedagg.Sampling; assert 'dp_accounting' not in sys.modules")
    assert run.returncode == 0, run.stderr
    run = python("-c", "import sys; sys.modules['dp_accounting'] = None\n"
                       "from fedagg.privacy_accounting import main\n"
                       "sys.exit(main(['--noise-multiplier', '1', '--sampling-rate', '0.1', '--rounds', '2', "
                       "'--delta', '1e-5']))")
    assert run.returncode == 1 and "needs Google's dp-accounting package" in run.stderr and run.stdout == "", run


def command(*args):
    return python("-m", "fedagg.privacy_accounting", *args)


def table(stdout):
    """The rounds' lines of the command's output: [(round, epsilon)], and its header line."""
    lines = stdout.splitlines()
    assert lines and lines[0].startswith("# noise multiplier "), stdout
    rows = [re.fullmatch(r"round (\d+) epsilon (\S+)", line) for line in lines[1:]]
    assert all(rows), stdout
    return [(int(row[1]), float(row[2])) for row in rows], lines[0]


@pytest.mark.parametrize("args, z, sampling, accountant", [
    (["--noise-multiplier", "1.2", "--sampling-rate", "0.05"], 1.2, pa.Sampling.poisson(0.05), pa.RDP),
    (["--noise-multiplier", "1.2", "--clients-per-round", "10", "--population", "200"], 1.2,
     pa.Sampling.poisson(0.05), pa.RDP),
    (["--noise-multiplier", "0.9", "--clients-per-round", "10", "--population", "200", "--sampling", "fixed"], 0.9,
     pa.Sampling.fixed_size(10, 200), pa.RDP),
    (["--noise-multiplier", "1.5", "--sampling-rate", "0.2", "--accountant", "pld"], 1.5,
     pa.Sampling.poisson(0.2), pa.PLD)])
def test_the_command_prints_epsilon_after_each_round(args, z, sampling, accountant):
    run = command(*args, "--rounds", "4", "--delta", "1e-5")
    assert run.returncode == 0 and run.stderr == "", run.stderr
    rows, header = table(run.stdout)
    assert [r for r, _ in rows] == [1, 2, 3, 4]
    for rounds, eps in rows:
        assert eps == pytest.approx(library_epsilon(z, sampling, rounds, DELTA, accountant), rel=1e-5)
    assert str(sampling) in header and f"{accountant} accountant" in header


def test_the_command_calibrates_for_a_target_epsilon():
    run = command("--target-epsilon", "3", "--clients-per-round", "50", "--population", "1000", "--rounds", "30",
                  "--delta", "1e-6")
    assert run.returncode == 0 and run.stderr == "", run.stderr
    rows, header = table(run.stdout)
    z = pa.calibrate_noise_multiplier(3.0, pa.Sampling.poisson(0.05), 30, 1e-6)
    assert f"noise multiplier {z:.6g} (calibrated for epsilon <= 3" in header
    assert len(rows) == 30 and rows[-1][1] <= 3.0 and rows[-1][1] == pytest.approx(3.0, rel=0.01)
    assert all(a[1] < b[1] for a, b in zip(rows, rows[1:]))


def test_the_command_helps_and_refuses():
    run = command("--help")
    assert run.returncode == 0 and "--target-epsilon" in run.stdout and "--clients-per-round" in run.stdout
    for args, message in [
            (["--noise-multiplier", "-1", "--sampling-rate", "0.1"], "noise multiplier must be > 0"),
            (["--noise-multiplier", "1", "--sampling-rate", "1.5"], "sampling rate must be in (0, 1]"),
            (["--noise-multiplier", "1", "--sampling-rate", "0.1", "--delta", "2"], "delta must be in (0, 1)"),
            (["--noise-multiplier", "1", "--sampling-rate", "0.1", "--rounds", "0"], "--rounds must be at least 1"),
            (["--noise-multiplier", "1", "--sampling-rate", "0.1", "--sampling", "fixed"], "--sampling fixed takes"),
            (["--noise-multiplier", "1", "--clients-per-round", "5", "--population", "9", "--sampling", "fixed",
              "--accountant", "pld"], "Poisson sampling only"),
            (["--noise-multiplier", "1", "--clients-per-round", "5"], "go together"),
            (["--noise-multiplier", "1", "--target-epsilon", "1", "--sampling-rate", "0.1"], "not allowed with"),
            (["--sampling-rate", "0.1"], "one of the arguments --noise-multiplier --target-epsilon is required")]:
        full = list(args)
        if "--rounds" not in full:
            full += ["--rounds", "3"]
        if "--delta" not in full:
            full += ["--delta", "1e-5"]
        run = command(*full)
        assert run.returncode == 2 and message in run.stderr and run.stdout == "", (args, run.stderr)


def test_the_control_api_accounts_a_sequence_of_private_aggregations(conn):
    """ControlClient.privacy_spent: epsilon after each finalized private aggregation, with the
    noise multiplier each spec declares (two rounds at z = 1, one at z = 2), the library's
    own figure; an aggregation never finalized spends nothing; one without privacy is refused."""
    import numpy as np
    from conftest import finish
    sampling, delta = pa.Sampling.poisson(0.05), 1e-5
    ids = []
    for i, z in enumerate([1.0, 1.0, 2.0]):
        privacy = fedagg.DifferentialPrivacy(clip_norm=1.0, noise_multiplier=z, expected_clients=1)
        status = conn.control.create(f"acct-{i}", fedagg.Field("float32", (4,), "federated_mean"), privacy=privacy)
        conn.submit("c", status, np.float32([1, 0, 0, 0]))
        finish(conn, status.aggregation_id)
        ids.append(status.aggregation_id)
    conn.control.create("acct-open", fedagg.Field("float32", (4,), "federated_mean"),
                        privacy=fedagg.DifferentialPrivacy(clip_norm=1.0, noise_multiplier=1.0, expected_clients=1))
    figures = conn.control.privacy_spent(ids[:2] + ["acct-open"] + ids[2:], sampling, delta)
    reference = pa.PrivacyAccountant(1.0, sampling, delta)
    expected = [reference.record_round(), reference.record_round(), reference.epsilon(),
                reference.record_round(1, 2.0)]
    assert figures == pytest.approx(expected, rel=1e-12)
    assert figures[3] < pa.PrivacyAccountant(1.0, sampling, delta).record_round(3)  # z = 2 spends less
    conn.control.create("acct-plain", fedagg.Field("float32", (4,), "federated_mean"))
    with pytest.raises(fedagg.FedaggError, match="declares no differential privacy"):
        conn.control.privacy_spent(["acct-plain"], sampling, delta)
