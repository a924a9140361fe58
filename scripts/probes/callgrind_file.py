"""Reading callgrind output files (the probes' instruction counts: guest-launch-instructions.sh,
launch-instructions.sh): each cost line with its function, object and, for a call, its callee,
names resolved from callgrind's compressed `(id) name` form."""
import re


def _name(table, v):
    m = re.match(r"\((\d+)\)(?: (.*))?", v)
    if not m:
        return v
    if m.group(2) is not None:
        table[m.group(1)] = m.group(2)
    return table[m.group(1)]


def lines(path):
    """Yields ("self", fn, fn_obj, None, None, cost) for a function's own cost line, ("call",
    fn, fn_obj, callee, callee_obj, cost) for a call's inclusive cost (the callee's object is the
    caller's unless `cob=` says otherwise), and ("total", ..., cost) for a summary or totals
    line. Inlined code counts in the function it was inlined into."""
    names, objs = {}, {}
    obj = fn = fn_obj = cfn = cobj = None
    call = False
    for l in open(path):
        l = l.rstrip("\n")
        if l.startswith("ob="):
            obj = _name(objs, l[3:])
        elif l.startswith("cob="):
            cobj = _name(objs, l[4:])
        elif l.startswith("fn="):
            fn, fn_obj, cobj = _name(names, l[3:]), obj, None
        elif l.startswith("cfn="):
            cfn = _name(names, l[4:])
        elif l.startswith("calls="):
            call = True
        elif l.startswith(("summary:", "totals:")):
            yield ("total", None, None, None, None, int(l.split()[1]))
        elif l and (l[0].isdigit() or l[0] in "+-*"):
            parts = l.split()
            cost = int(parts[1]) if len(parts) > 1 else 0
            if call:
                yield ("call", fn, fn_obj, cfn, cobj if cobj is not None else fn_obj, cost)
                call = False
                cobj = None
            else:
                yield ("self", fn, fn_obj, None, None, cost)
