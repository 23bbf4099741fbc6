"""The Lightning goals (bulk surprise removal at hardware speed) of a run
with disconnect-flag records of a stock and a patched VM: computed from
their metrics (lab_disconnect_metrics) into summary.json's `lightning`,
so that whether a run met them is read, never worked out by hand.

Each goal names its value, its limit and whether it was met; a value that
could not be computed (a variant or timeout missing, a yank without data)
is None and the goal is `not measured`, never met: so is a ratio of a value
with itself (one completion timeout, one size). These are benchmark outcomes: a run
records them, no test asserts them (tests/test_filters.py checks the
arithmetic on fixed records)."""

# the largest completion timeout may cost patched at most this much more
# than none; patched at the largest timeout at most this share of stock;
# T(N)/T(1) at no timeout at most SCALING, or T(N) within FLOOR of the CPU
# work its teardown had to do anyway (T_over_floor)
TIMEOUT_COST = 1.25
STOCK_SHARE = 1 / 3
SCALING = 4.0
FLOOR = 1.25
FLAG = "marked"


def _record(records, variant):
    recs = [r for r in records or [] if r.get("name") == "disconnect-flag" and r.get("variant") == variant
            and (r.get("metrics") or {}).get("T_ms")]
    return recs[0] if len(recs) == 1 else None


def _at(metrics, key, timeout, n):
    """metrics[key][timeout][FLAG][n] (lab_disconnect_metrics' layout), None where absent."""
    return (((metrics.get(key) or {}).get(timeout) or {}).get(FLAG) or {}).get(n)


def _t(metrics, timeout, n):
    return _at(metrics, "T_ms", timeout, n)


def _within(value, limit):
    return value is not None and value <= limit


def _goal(name, value, limit, met, source, measured=True):
    """A goal: met only when its inputs were measured (a ratio of a value
    with itself, or of a value that is missing, is `not measured`)."""
    measured = bool(measured) and value is not None
    met = bool(met) and measured
    return {"goal": name, "value": value if measured else None, "limit": limit, "met": met,
            "status": "met" if met else ("not met" if measured else "not measured"), "from": source}


def _ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


def lab_lightning_goals(records):
    """{} unless the run has exactly one disconnect-flag record of stock
    and of patched, both with numeric completion timeouts (fidelity); {},
    not None, because Ansible's templating writes a None as ''."""
    stock, patched = _record(records, "stock"), _record(records, "patched")
    if not stock or not patched:
        return {}
    sm, pm = stock["metrics"], patched["metrics"]
    try:
        timeouts = sorted(int(t) for t in pm["T_ms"])
    except ValueError:
        return {}  # Debian's QEMU: no completion timeout to set
    t0, tmax = str(timeouts[0]), str(timeouts[-1])
    sizes = sorted(int(n) for n in pm.get("sizes") or [])
    if not sizes:
        return {}
    big, one = str(sizes[-1]), str(sizes[0])
    p_big0, p_bigmax, s_bigmax = _t(pm, t0, big), _t(pm, tmax, big), _t(sm, tmax, big)
    p_one0 = _t(pm, t0, one)
    floor = _at(pm, "T_over_floor", t0, big)
    scaling = _ratio(p_big0, p_one0)
    timeout_cost, stock_share = _ratio(p_bigmax, p_big0), _ratio(p_bigmax, s_bigmax)
    table = []
    for t in [str(x) for x in timeouts]:
        reads = {label: (_at(m, "absent_reads", t, big) or {}).get("total") for label, m in (("stock", sm),
                                                                                          ("patched", pm))}
        table.append({"timeout_us": int(t), "stock_T_ms": _t(sm, t, big), "patched_T_ms": _t(pm, t, big),
                      "patched_T1_ms": _t(pm, t, one), "patched_T_over_floor": _at(pm, "T_over_floor", t, big),
                      "absent_reads_stock": reads["stock"], "absent_reads_patched": reads["patched"]})
    absent = [row["absent_reads_patched"] for row in table]
    # a ratio needs two different timeouts, or two different sizes
    two_timeouts, two_sizes = t0 != tmax, big != one
    if not two_sizes:
        scaling = None
    goals = [
        _goal(f"patched T({big}) at {tmax} us over at {t0} us", timeout_cost, TIMEOUT_COST,
              _within(timeout_cost, TIMEOUT_COST), f"T_ms[{tmax}][{FLAG}][{big}] / T_ms[{t0}][{FLAG}][{big}]",
              measured=two_timeouts),
        _goal(f"patched over stock T({big}) at {tmax} us", stock_share, round(STOCK_SHARE, 3),
              _within(stock_share, STOCK_SHARE), f"T_ms[{tmax}][{FLAG}][{big}], patched / stock"),
        _goal(f"patched T({big})/T({one}) at {t0} us, or T({big}) over its teardown floor",
              {"T_over_T1": scaling, "T_over_floor": floor}, {"T_over_T1": SCALING, "T_over_floor": FLOOR},
              _within(scaling, SCALING) or _within(floor, FLOOR),
              f"T_ms[{t0}][{FLAG}]; T_over_floor[{t0}][{FLAG}][{big}] (median over the yanks)",
              measured=scaling is not None or floor is not None),
        _goal(f"patched reads of removed drives, T({big}) yanks, every timeout",
              None if None in absent else sum(absent), 0, None not in absent and sum(absent) == 0,
              f"absent_reads[*][{FLAG}][{big}].total"),
    ]
    return {"vms": {"stock": stock.get("vm"), "patched": patched.get("vm")}, "drives": int(big),
            "table": table, "goals": goals, "met": all(g["met"] for g in goals)}


def lab_format_lightning(lightning):
    """Lines for the run's log: the table and each goal."""
    if not lightning:
        return []
    lines = [f"lightning: T({lightning['drives']}) ms stock/patched, patched T(1), T over floor, absent reads stock/patched"]
    for r in lightning["table"]:
        lines.append(f"  {r['timeout_us']} us: {r['stock_T_ms']} / {r['patched_T_ms']}, {r['patched_T1_ms']}, "
                     f"{r['patched_T_over_floor']}, {r['absent_reads_stock']} / {r['absent_reads_patched']}")
    for g in lightning["goals"]:
        status = g.get("status") or ("met" if g["met"] else "not met")
        status = status if g["met"] else status.replace("not ", "NOT ")
        lines.append(f"  {status}: {g['goal']} = {g['value']} (limit {g['limit']})")
    return lines


class FilterModule:
    def filters(self):
        return {"lab_lightning_goals": lab_lightning_goals, "lab_format_lightning": lab_format_lightning}
