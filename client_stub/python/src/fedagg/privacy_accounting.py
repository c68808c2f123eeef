"""Privacy accounting for DP-FedAvg rounds: the privacy spent (epsilon at a given delta)
after each round of a sequence, and the noise multiplier that reaches a target epsilon.
Every figure comes from Google's dp-accounting library (PyPI `dp-accounting`, an optional
dependency: `pip install fedagg[privacy]`; scripts/setup.sh installs it into
.venv-privacy): this module only builds the library's DP events and accountants and
checks its inputs. `import fedagg` does not need the library; calling this module does.

A round adds Gaussian noise of standard deviation z * C to the sum of clipped updates
(C the clipping bound, z the noise multiplier) and takes its clients by one of two
samplings:
  - Poisson: each of the population's clients independently with probability q (the
    neighbouring datasets differ by one client added or removed);
  - fixed size: n of the population's N clients, without replacement (the neighbouring
    datasets differ by one client replaced, the only relation the library accounts this
    sampling under; its epsilon is about twice that of add-or-remove).
Two accountants: "rdp" (Renyi DP, Mironov 2017; both samplings) and "pld" (privacy loss
distributions, tighter; Poisson only: the library has no PLD of sampling without
replacement). Neither this module nor the library sees any update: the figures depend on
z, the sampling, delta and the number of rounds alone.

    from fedagg.privacy_accounting import PrivacyAccountant, Sampling
    spent = PrivacyAccountant(1.1, Sampling.poisson(0.01), delta=1e-5)
    for round in range(100):
        ...                       # one DP round
        print(spent.record_round())

The command line prints epsilon after each round, or calibrates z for a target epsilon:
    python -m fedagg.privacy_accounting --noise-multiplier 1.1 --sampling-rate 0.01 \\
        --rounds 100 --delta 1e-5
    python -m fedagg.privacy_accounting --target-epsilon 8 --clients-per-round 100 \\
        --population 10000 --sampling fixed --rounds 100 --delta 1e-5
"""
import argparse
import logging
import math
import operator
import sys
from dataclasses import dataclass
from typing import List, Optional, Sequence

POISSON, FIXED_SIZE = "poisson", "fixed_size"
RDP, PLD = "rdp", "pld"
ACCOUNTANTS = (RDP, PLD)

__all__ = ["ACCOUNTANTS", "FIXED_SIZE", "PLD", "POISSON", "RDP", "PrivacyAccountant", "Sampling",
           "calibrate_noise_multiplier", "epsilon", "main"]


def _library():
    """dp_accounting, imported on first use (so that `import fedagg` does not need it)."""
    try:
        import dp_accounting  # its __init__ imports the accountants' modules, dp_accounting.pld and .rdp
    except ImportError as missing:
        raise ImportError("fedagg.privacy_accounting needs Google's dp-accounting package (tested with "
                          "0.6.0): pip install 'fedagg[privacy]' or pip install dp-accounting==0.6.0; "
                          f"in this repository scripts/setup.sh installs it into .venv-privacy ({missing})",
                          name="dp_accounting") from None
    return dp_accounting


def _number(what: str, value) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number, not {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, not {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, not {value!r}")
    return number


def _count(what: str, value, least: int) -> int:
    try:
        count = operator.index(value)  # an int (or NumPy integer), never a truncated float
    except TypeError:
        raise ValueError(f"{what} must be a whole number, not {value!r}") from None
    if count < least:
        raise ValueError(f"{what} must be at least {least}, not {count}")
    return count


def _check_noise_multiplier(noise_multiplier) -> float:
    z = _number("the noise multiplier", noise_multiplier)
    if z < 0:
        raise ValueError(f"the noise multiplier must be > 0, not {noise_multiplier}: it is the standard "
                         "deviation of the Gaussian noise over the clipping bound, never negative")
    if z == 0:
        raise ValueError("the noise multiplier must be > 0: with 0 the rounds add no noise and no finite "
                         "epsilon holds (pass the z the aggregation adds, e.g. 1.0)")
    return z


def _check_delta(delta) -> float:
    d = _number("delta", delta)
    if not 0 < d < 1:
        raise ValueError(f"delta must be in (0, 1), not {delta}: the probability the epsilon bound fails, "
                         "usually below 1 / population (e.g. 1e-5)")
    return d


def _check_accountant(accountant) -> str:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {accountant!r}; use 'rdp' or 'pld'")
    return accountant


@dataclass(frozen=True)
class Sampling:
    """How each round takes its clients: Sampling.poisson(q) or Sampling.fixed_size(n, N)."""
    kind: str
    probability: float = 0.0  # Poisson: each client with probability q
    clients: int = 0          # fixed size: n clients a round ...
    population: int = 0       # ... out of N

    def __post_init__(self):  # checks Sampling(...) as well as the two constructors below
        if self.kind == POISSON:
            q = _number("the sampling rate", self.probability)
            if not 0 < q <= 1:
                raise ValueError(f"a Poisson sampling rate must be in (0, 1], not {self.probability}: the "
                                 "probability that a round takes a given client (clients per round / population)")
            object.__setattr__(self, "probability", q)
        elif self.kind == FIXED_SIZE:
            population = _count("the population", self.population, 1)
            clients = _count("the clients per round", self.clients, 1)
            if clients > population:
                raise ValueError(f"a fixed-size sampling takes 1 to {population} clients of the population of "
                                 f"{population}, not {clients}")
            object.__setattr__(self, "population", population)
            object.__setattr__(self, "clients", clients)
        else:
            raise ValueError(f"unknown sampling {self.kind!r}: use Sampling.poisson(q) or Sampling.fixed_size(n, N)")

    @classmethod
    def poisson(cls, probability: float) -> "Sampling":
        return cls(POISSON, probability=probability)

    @classmethod
    def fixed_size(cls, clients: int, population: int) -> "Sampling":
        return cls(FIXED_SIZE, clients=clients, population=population)

    @property
    def rate(self) -> float:
        """The probability that a round takes a given client."""
        return self.probability if self.kind == POISSON else self.clients / self.population

    def __str__(self) -> str:
        if self.kind == POISSON:
            return f"Poisson sampling, rate {self.probability:g}"
        return f"fixed-size sampling, {self.clients} of {self.population} clients"


def _round_event(noise_multiplier: float, sampling: Sampling):
    dp = _library()
    gaussian = dp.GaussianDpEvent(noise_multiplier)
    if sampling.kind == POISSON:
        return dp.PoissonSampledDpEvent(sampling.probability, gaussian)
    return dp.SampledWithoutReplacementDpEvent(sampling.population, sampling.clients, gaussian)


def _check_pairing(accountant: str, sampling: Sampling) -> None:
    if accountant == PLD and sampling.kind != POISSON:
        raise ValueError("the PLD accountant takes Poisson sampling only (dp-accounting has no PLD of "
                         "sampling without replacement); use the 'rdp' accountant for fixed-size rounds")


def _fresh_accountant(accountant: str, sampling: Sampling):
    dp = _library()
    relation = (dp.NeighboringRelation.ADD_OR_REMOVE_ONE if sampling.kind == POISSON
                else dp.NeighboringRelation.REPLACE_ONE)
    if accountant == RDP:
        return dp.rdp.RdpAccountant(neighboring_relation=relation)
    return dp.pld.PLDAccountant(neighboring_relation=relation)


class PrivacyAccountant:
    """The privacy spent by a sequence of rounds with noise multiplier `noise_multiplier`
    and `sampling`, as epsilon at `delta`, by dp-accounting's `accountant` ("rdp" or
    "pld"). record_round() adds rounds and returns epsilon after them; epsilon() is what
    the rounds so far spent (0 before any); epsilons(rounds) the figure after each of
    `rounds` more."""

    def __init__(self, noise_multiplier: float, sampling: Sampling, delta: float, accountant: str = RDP):
        if not isinstance(sampling, Sampling):
            raise ValueError(f"sampling must be Sampling.poisson(q) or Sampling.fixed_size(n, N), not {sampling!r}")
        self.noise_multiplier = _check_noise_multiplier(noise_multiplier)
        self.delta = _check_delta(delta)
        self.accountant = _check_accountant(accountant)
        _check_pairing(accountant, sampling)
        self.sampling = sampling
        self._accountant = _fresh_accountant(accountant, sampling)
        self._event = _round_event(self.noise_multiplier, sampling)
        self.rounds = 0

    def record_round(self, count: int = 1, noise_multiplier: Optional[float] = None) -> float:
        """Adds `count` rounds (with `noise_multiplier` when given, the accountant's own
        otherwise: rounds of a sequence may differ); returns epsilon after them."""
        count = _count("the number of rounds", count, 0)
        if count:
            event = (self._event if noise_multiplier is None
                     else _round_event(_check_noise_multiplier(noise_multiplier), self.sampling))
            self._accountant.compose(event, count)
            self.rounds += count
        return self.epsilon()

    def epsilon(self) -> float:
        """Epsilon at delta after the rounds recorded so far: the library's figure, and 0
        before any round (nothing was released)."""
        return float(self._accountant.get_epsilon(self.delta)) if self.rounds else 0.0

    def epsilons(self, rounds: int) -> List[float]:
        """Epsilon after each of `rounds` further rounds (recording them)."""
        return [self.record_round() for _ in range(_count("the number of rounds", rounds, 0))]


def epsilon(noise_multiplier: float, sampling: Sampling, rounds: int, delta: float, accountant: str = RDP) -> float:
    """Epsilon at `delta` after `rounds` rounds."""
    return PrivacyAccountant(noise_multiplier, sampling, delta, accountant).record_round(rounds)


def calibrate_noise_multiplier(target_epsilon: float, sampling: Sampling, rounds: int, delta: float,
                               accountant: str = RDP, tolerance: float = 1e-4) -> float:
    """The smallest noise multiplier z (within `tolerance`, relative) whose `rounds`
    rounds spend at most `target_epsilon` at `delta`: dp-accounting's
    calibrate_dp_mechanism, searching log z (so that its absolute tolerance is relative in
    z) from 1e-3 to 1e6 with the RDP accountant, and from half the RDP accountant's z with
    PLD. The z returned spends at most the target (the library guarantees it); a target
    no z in that range meets is a ValueError."""
    target = _number("the target epsilon", target_epsilon)
    if target <= 0:
        raise ValueError(f"the target epsilon must be > 0, not {target_epsilon}")
    if not isinstance(sampling, Sampling):
        raise ValueError(f"sampling must be Sampling.poisson(q) or Sampling.fixed_size(n, N), not {sampling!r}")
    rounds = _count("the number of rounds to calibrate for", rounds, 1)
    delta = _check_delta(delta)
    _check_pairing(_check_accountant(accountant), sampling)
    tolerance = _number("the tolerance", tolerance)
    if not 0 < tolerance < 1:
        raise ValueError(f"the tolerance (relative) must be in (0, 1), not {tolerance}")
    dp = _library()

    def make_event(log_z: float):
        return dp.SelfComposedDpEvent(_round_event(math.exp(log_z), sampling), rounds)

    def make_accountant():
        return _fresh_accountant(accountant, sampling)

    def spent(z: float) -> float:
        return epsilon(z, sampling, rounds, delta, accountant)

    where = f"after {rounds} rounds at delta {delta:g} with {sampling} ({accountant} accountant)"
    if accountant == PLD:
        # A PLD of a small noise multiplier is huge (the library runs out of memory if it
        # brackets from far below); PLD is the tighter accountant, so its z lies at or below
        # RDP's, and above half of it for the samplings of federated rounds.
        lowest = calibrate_noise_multiplier(target, sampling, rounds, delta, RDP, tolerance) / 2
        highest = 2 * lowest
        if spent(lowest) <= target:
            raise ValueError(f"the PLD accountant's noise multiplier for epsilon {target:g} {where} lies below "
                             f"half of the RDP accountant's ({lowest:g}), where this calibration does not search; "
                             "calibrate with the 'rdp' accountant")
        if spent(highest) > target:
            highest *= 2  # never seen: PLD above RDP; one doubling, checked again below
    else:
        lowest, highest = 1e-3, 1e6
        if spent(lowest) <= target:
            raise ValueError(f"even a noise multiplier of {lowest:g} spends less than epsilon {target:g} {where}: "
                             "the target does not constrain the noise; choose a smaller target epsilon")
    if spent(highest) > target:
        raise ValueError(f"even a noise multiplier of {highest:g} spends more than epsilon {target:g} {where}; "
                         "choose a larger target epsilon, fewer rounds or fewer clients a round")
    # The library searches log z between the two bounds just checked to bracket the target.
    log_z = dp.calibrate_dp_mechanism(make_accountant, make_event, target, delta,
                                      dp.ExplicitBracketInterval(math.log(lowest), math.log(highest)),
                                      tol=math.log1p(tolerance))
    return math.exp(log_z)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fedagg.privacy_accounting",
        description="The privacy DP-FedAvg rounds spend: epsilon at DELTA after each round (one line a round,\n"
                    "after a '#' header), by dp-accounting's accountants. Give the noise multiplier, or a\n"
                    "target epsilon to calibrate it for (the smallest z that spends at most the target\n"
                    "after ROUNDS rounds).",
        epilog="examples:\n"
               "  python -m fedagg.privacy_accounting --noise-multiplier 1.1 --sampling-rate 0.01 --rounds 100 "
               "--delta 1e-5\n"
               "  python -m fedagg.privacy_accounting --target-epsilon 8 --clients-per-round 100 "
               "--population 10000 --sampling fixed --rounds 100 --delta 1e-5",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    noise = parser.add_mutually_exclusive_group(required=True)
    noise.add_argument("--noise-multiplier", type=float, metavar="Z",
                       help="standard deviation of the Gaussian noise over the clipping bound")
    noise.add_argument("--target-epsilon", type=float, metavar="EPSILON",
                       help="calibrate the noise multiplier to spend at most EPSILON after ROUNDS rounds")
    parser.add_argument("--sampling", choices=("poisson", "fixed"), default="poisson",
                        help="each client independently with the sampling rate (poisson, default), or exactly "
                             "CLIENTS of POPULATION (fixed; rdp accountant only)")
    parser.add_argument("--sampling-rate", type=float, metavar="Q",
                        help="Poisson: the probability that a round takes a given client, in (0, 1]")
    parser.add_argument("--clients-per-round", type=int, metavar="CLIENTS",
                        help="clients a round takes (with --population; Poisson: the rate is CLIENTS / POPULATION)")
    parser.add_argument("--population", type=int, metavar="POPULATION", help="clients there are to sample from")
    parser.add_argument("--rounds", type=int, required=True, help="number of rounds (at least 1)")
    parser.add_argument("--delta", type=float, required=True,
                        help="delta of (epsilon, delta)-DP, in (0, 1); usually below 1 / POPULATION")
    parser.add_argument("--accountant", choices=ACCOUNTANTS, default=RDP,
                        help="Renyi DP (rdp, default) or privacy loss distributions (pld: tighter, Poisson only, "
                             "slower: about half a second a round)")
    return parser


def _sampling(args, parser: argparse.ArgumentParser) -> Sampling:
    by_count = args.clients_per_round is not None or args.population is not None
    if by_count and (args.clients_per_round is None or args.population is None):
        parser.error("--clients-per-round and --population go together")
    if args.sampling == "fixed":
        if args.sampling_rate is not None or not by_count:
            parser.error("--sampling fixed takes --clients-per-round and --population (not --sampling-rate)")
        return Sampling.fixed_size(args.clients_per_round, args.population)
    if args.sampling_rate is not None and by_count:
        parser.error("give --sampling-rate or --clients-per-round with --population, not both")
    if args.sampling_rate is None and not by_count:
        parser.error("give --sampling-rate, or --clients-per-round with --population")
    if by_count:
        if not 0 < args.clients_per_round <= args.population:
            parser.error(f"--clients-per-round must be 1 to --population ({args.population}), "
                         f"not {args.clients_per_round}")
        return Sampling.poisson(args.clients_per_round / args.population)
    return Sampling.poisson(args.sampling_rate)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    # The RDP accountant logs a warning (through absl) for each Renyi order whose series did
    # not converge, and leaves that order out: the epsilon printed is then the minimum over
    # the other orders, still a bound. Dozens of such lines would bury the table.
    logging.getLogger("absl").setLevel(logging.ERROR)
    try:
        sampling = _sampling(args, parser)
        if args.rounds is None or args.rounds < 1:
            raise ValueError(f"--rounds must be at least 1, not {args.rounds}")
        if args.target_epsilon is not None:
            z = calibrate_noise_multiplier(args.target_epsilon, sampling, args.rounds, args.delta, args.accountant)
            how = f"calibrated for epsilon <= {args.target_epsilon:g} after {args.rounds} rounds"
        else:
            z, how = args.noise_multiplier, "given"
        spent = PrivacyAccountant(z, sampling, args.delta, args.accountant)
    except ValueError as refused:
        parser.error(str(refused))
    except ImportError as missing:
        print(f"{parser.prog}: {missing}", file=sys.stderr)
        return 1
    print(f"# noise multiplier {z:.6g} ({how}), {sampling}, {args.accountant} accountant, delta {args.delta:g}")
    for round_number in range(1, args.rounds + 1):
        print(f"round {round_number} epsilon {spent.record_round():.6g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
