#!/usr/bin/env python3
"""Independent oracle for CronOracleTests: next fire times of cron expressions, computed by croniter.

Usage: cron_oracle.py CASES_FILE

Each line of CASES_FILE is `EXPRESSION<TAB>BASE<TAB>COUNT`, BASE being local seconds (a civil time encoded
as seconds since 1970-01-01T00:00:00, i.e. computed in UTC). For each line it prints one line: the COUNT
successive fire times strictly after BASE as integers separated by spaces (ending in `NONE` where croniter
finds no next time), or `ERROR <message>` when croniter rejects the expression.

The first line printed is `croniter <version>`, so the test can report which oracle it ran.

croniter is called with Vixie cron's semantics:
  * day_or=True, implement_cron_bug=True: when both day fields are restricted a day matching either
    fires, but when either field *starts with* `*` (including `*/n`) both must match -- Vixie's
    DOM_STAR/DOW_STAR rule, which croniter calls "the cron bug".
  * second_at_beginning=True for 6 fields, so the seconds field comes first, as in timerd.
The generator in CronOracleTests.swift avoids the constructs where croniter differs from Vixie cron
(listed there).
"""

import sys
from datetime import datetime, timezone

try:
    import croniter as croniter_module
    from croniter import croniter, CroniterBadDateError
except ImportError as error:  # the Swift test turns this into "run make oracle-deps"
    print(f"MISSING croniter: {error}", flush=True)
    sys.exit(3)


def main() -> None:
    version = getattr(croniter_module, "__version__", None)
    if version is None:
        from importlib.metadata import version as package_version
        version = package_version("croniter")
    out = [f"croniter {version}"]
    with open(sys.argv[1], encoding="utf-8") as cases:
        for line in cases:
            line = line.rstrip("\n")
            if not line:
                continue
            expression, base, count = line.split("\t")
            start = datetime.fromtimestamp(int(base), tz=timezone.utc)
            try:
                iterator = croniter(
                    expression,
                    start,
                    day_or=True,
                    implement_cron_bug=True,
                    second_at_beginning=len(expression.split()) == 6,
                )
                times = []
                try:
                    for _ in range(int(count)):
                        times.append(str(int(iterator.get_next(float))))
                except CroniterBadDateError:
                    times.append("NONE")
                out.append(" ".join(times))
            except Exception as error:  # noqa: BLE001 - report any rejection to the test
                out.append(f"ERROR {type(error).__name__}: {error}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
