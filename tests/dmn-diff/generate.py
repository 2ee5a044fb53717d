#!/usr/bin/env python3
"""Writes the generated part of the DMN differential corpus: corpus/g-*.dmn and cases.jsonl.

cases.jsonl = the generated cases, then hand-cases.jsonl (cases for the hand-written
corpus/h-*.dmn files). Deterministic (no randomness): run it, then regenerate.sh, and review
the diff of expected.jsonl. The files look like Camunda Modeler's: one per DMN version 1.1 to
1.5 (namespaces, diagram elements: `biodi` extension elements for 1.1, `dmndi` for 1.2 on).
"""
import json
import os
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

VERSIONS = {
    "11": ("http://www.omg.org/spec/DMN/20151101/dmn.xsd", None),
    "12": ("http://www.omg.org/spec/DMN/20180521/MODEL/", "http://www.omg.org/spec/DMN/20180521/DMNDI/"),
    "13": ("https://www.omg.org/spec/DMN/20191111/MODEL/", "https://www.omg.org/spec/DMN/20191111/DMNDI/"),
    "14": ("https://www.omg.org/spec/DMN/20211108/MODEL/", "https://www.omg.org/spec/DMN/20191111/DMNDI/"),
    "15": ("https://www.omg.org/spec/DMN/20230324/MODEL/", "https://www.omg.org/spec/DMN/20230324/DMNDI/"),
}

cases = []


def case(dmn, decision, vars_, cid=None):
    cid = cid or f"{dmn[:-4]} {decision} {json.dumps(vars_, separators=(',', ':'))}"
    cases.append({"id": cid, "dmn": dmn, "decision": decision, "vars": vars_})


def parse_case(dmn, cid=None):
    cases.append({"id": cid or f"{dmn[:-4]} (parse)", "dmn": dmn})


def t(s):
    return escape(s)


def table(did, name, hit, inputs, outputs, rules, aggregation=None, requires=(), variable=None):
    """inputs: [(label, expr, typeRef, inputValues)], outputs: [(label, name, typeRef, outputValues)],
    rules: [([input entries], [output entries])]."""
    hp = "" if hit is None else f' hitPolicy="{hit}"'
    ag = "" if aggregation is None else f' aggregation="{aggregation}"'
    x = [f'  <decision id="{did}" name="{t(name)}">']
    if variable:
        x.append(f'    <variable id="{did}_var" name="{variable[0]}" typeRef="{variable[1]}" />')
    for i, r in enumerate(requires):
        x.append(f'    <informationRequirement id="{did}_req{i}">\n      <requiredDecision href="#{r}" />\n    </informationRequirement>')
    x.append(f'    <decisionTable id="{did}_table"{hp}{ag}>')
    for i, (label, expr, type_ref, values) in enumerate(inputs):
        lab = "" if label is None else f' label="{t(label)}"'
        tr = "" if type_ref is None else f' typeRef="{type_ref}"'
        x.append(f'      <input id="{did}_in{i}"{lab}>')
        x.append(f'        <inputExpression id="{did}_ie{i}"{tr}>\n          <text>{t(expr)}</text>\n        </inputExpression>')
        if values is not None:
            x.append(f'        <inputValues id="{did}_iv{i}">\n          <text>{t(values)}</text>\n        </inputValues>')
        x.append('      </input>')
    for i, (label, oname, type_ref, values) in enumerate(outputs):
        lab = "" if label is None else f' label="{t(label)}"'
        nm = "" if oname is None else f' name="{oname}"'
        tr = "" if type_ref is None else f' typeRef="{type_ref}"'
        if values is None:
            x.append(f'      <output id="{did}_out{i}"{lab}{nm}{tr} />')
        else:
            x.append(f'      <output id="{did}_out{i}"{lab}{nm}{tr}>\n        <outputValues id="{did}_ov{i}">\n          <text>{t(values)}</text>\n        </outputValues>\n      </output>')
    for r, (ins, outs) in enumerate(rules):
        x.append(f'      <rule id="{did}_r{r + 1}">')
        for i, e in enumerate(ins):
            x.append(f'        <inputEntry id="{did}_r{r + 1}_i{i}">\n          <text>{t(e)}</text>\n        </inputEntry>')
        for i, e in enumerate(outs):
            x.append(f'        <outputEntry id="{did}_r{r + 1}_o{i}">\n          <text>{t(e)}</text>\n        </outputEntry>')
        x.append('      </rule>')
    x.append('    </decisionTable>\n  </decision>')
    return "\n".join(x)


def literal(did, name, expr, variable=None, requires=()):
    x = [f'  <decision id="{did}" name="{t(name)}">']
    if variable:
        tr = "" if variable[1] is None else f' typeRef="{variable[1]}"'
        x.append(f'    <variable id="{did}_var" name="{variable[0]}"{tr} />')
    for i, r in enumerate(requires):
        x.append(f'    <informationRequirement id="{did}_req{i}">\n      <requiredDecision href="#{r}" />\n    </informationRequirement>')
    x.append(f'    <literalExpression id="{did}_expr">\n      <text>{t(expr)}</text>\n    </literalExpression>\n  </decision>')
    return "\n".join(x)


def decision_ids(decisions):
    import re
    return re.findall(r'<decision id="([^"]+)"', "\n".join(decisions))


def write(fname, version, decisions, defs_id="definitions"):
    ns, dmndi = VERSIONS[version]
    body = "\n".join(decisions)
    ids = decision_ids(decisions)
    if version == "11":
        # Camunda Modeler 1.x/3.x: diagram bounds as biodi extension elements of each decision
        # DMN 1.1's informationRequirement has no id
        import re
        body = re.sub(r'<informationRequirement id="[^"]*">', "<informationRequirement>", body)
        parts = []
        for line in body.split("\n"):
            parts.append(line)
            if line.startswith('  <decision id="'):
                parts.append('    <extensionElements>\n      <biodi:bounds x="150" y="80" width="180" height="80" />\n    </extensionElements>')
        body = "\n".join(parts)
        head = f'<definitions xmlns="{ns}" xmlns:biodi="http://bpmn.io/schema/dmn/biodi/1.0" id="{defs_id}" name="DRD" namespace="http://camunda.org/schema/1.0/dmn">'
        tail = "</definitions>"
    else:
        head = (f'<definitions xmlns="{ns}" xmlns:dmndi="{dmndi}" xmlns:dc="http://www.omg.org/spec/DMN/20180521/DC/" '
                f'xmlns:modeler="http://camunda.org/schema/modeler/1.0" id="{defs_id}" name="DRD" '
                f'namespace="http://camunda.org/schema/1.0/dmn" exporter="Camunda Modeler" exporterVersion="5.20.0" '
                f'modeler:executionPlatform="Camunda Cloud" modeler:executionPlatformVersion="8.5.0">')
        shapes = "\n".join(
            f'    <dmndi:DMNShape id="DMNShape_{d}" dmnElementRef="{d}">\n      <dc:Bounds height="80" width="180" x="{150 + 220 * i}" y="80" />\n    </dmndi:DMNShape>'
            for i, d in enumerate(ids))
        tail = f'  <dmndi:DMNDI>\n    <dmndi:DMNDiagram id="DMNDiagram_1">\n{shapes}\n    </dmndi:DMNDiagram>\n  </dmndi:DMNDI>\n</definitions>'
    with open(os.path.join(CORPUS, fname), "w") as f:
        f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n{head}\n{body}\n{tail}\n')


V = list(VERSIONS)


def ver(i):
    return V[i % len(V)]


# ---- hit policies over one number input (x), one output: every policy, several x

NUM_RULES = [
    (["< 0"], ['"negative"']),
    (["[0..5]"], ['"small"']),
    (["[3..8)"], ['"medium"']),
    (["> 6"], ['"large"']),
    (["10"], ['"ten"']),
    (["-"], ['"any"']),
]
NUM_RULES_NOANY = NUM_RULES[:5]
XS = [-3, 0, 1, 3, 4.5, 5, 6, 7, 8, 10, 11, None]

for k, (hit, agg, rules, ov) in enumerate([
    ("UNIQUE", None, NUM_RULES_NOANY, None),
    ("FIRST", None, NUM_RULES, None),
    ("PRIORITY", None, NUM_RULES, '"ten","large","medium","small","negative","any"'),
    ("PRIORITY", None, NUM_RULES, None),
    ("ANY", None, NUM_RULES_NOANY, None),
    ("COLLECT", None, NUM_RULES, None),
    ("RULE ORDER", None, NUM_RULES, None),
    ("OUTPUT ORDER", None, NUM_RULES, '"any","negative","small","medium","large","ten"'),
    (None, None, NUM_RULES_NOANY, None),
]):
    fname = f"g-hit-{(hit or 'default').lower().replace(' ', '-')}-{k}.dmn"
    d = table("size", "Size", hit, [("X", "x", "number", None)], [("Size", "size", "string", ov)], rules, agg)
    write(fname, ver(k), [d])
    for x in XS:
        case(fname, "size", {} if x is None else {"x": x})

# COLLECT with aggregators over numbers (and a string output for the number check)
NUM_OUT_RULES = [
    (["> 0"], ["1"]),
    (["> 2"], ["2.5"]),
    (["> 4"], ["-4"]),
    (["[1..3]"], ["10"]),
    (["< 0"], ["x"]),
]
for k, agg in enumerate(["SUM", "MIN", "MAX", "COUNT", None]):
    fname = f"g-collect-{(agg or 'list').lower()}.dmn"
    d = table("score", "Score", "COLLECT", [("X", "x", "number", None)], [("Score", "score", "number", None)], NUM_OUT_RULES, agg)
    write(fname, ver(k + 1), [d])
    for x in [-5, -1, 0, 1, 2, 3, 4, 5, 9, None]:
        case(fname, "score", {} if x is None else {"x": x})
for k, agg in enumerate(["SUM", "MIN", "MAX", "COUNT"]):
    fname = f"g-collect-{agg.lower()}-strings.dmn"
    d = table("tags", "Tags", "COLLECT", [("X", "x", "number", None)], [("Tag", "tag", "string", None)],
              [(["> 0"], ['"a"']), (["> 5"], ['"b"']), (["< 0"], ["x"])], agg)
    write(fname, ver(k + 2), [d])
    for x in [-2, 1, 7, 0]:
        case(fname, "tags", {"x": x})

# ---- multiple outputs: a context per rule, every policy
MULTI_RULES = [
    (['"gold"', "> 1000"], ['"premium"', "0.2", '"gold 1000+"']),
    (['"gold"', "-"], ['"standard"', "0.1", '"gold"']),
    (['"silver","bronze"', ">= 500"], ['"standard"', "0.05", '"silver or bronze 500+"']),
    (['not("gold")', "< 500"], ['"basic"', "0", '"not gold below 500"']),
    (["-", "> 5000"], ['"premium"', "0.25", '"anyone 5000+"']),
]
for k, hit in enumerate(["UNIQUE", "FIRST", "PRIORITY", "ANY", "COLLECT", "RULE ORDER", "OUTPUT ORDER"]):
    fname = f"g-multi-{hit.lower().replace(' ', '-')}.dmn"
    d = table("discount", "Discount", hit,
              [("Customer", "customer", "string", '"gold","silver","bronze"'), ("Amount", "amount", "number", None)],
              [("Tier", "tier", "string", '"premium","standard","basic"'), ("Rate", "rate", "number", None), (None, "reason", "string", None)],
              MULTI_RULES)
    write(fname, ver(k), [d])
    for cust in ["gold", "silver", "bronze", "wood"]:
        for amount in [100, 700, 2000, 9000]:
            case(fname, "discount", {"customer": cust, "amount": amount})
    case(fname, "discount", {"customer": "gold"})
    case(fname, "discount", {})

# ---- strings, booleans, dates, durations, lists in entries; input values (not enforced)
TYPED = [
    ("g-types-string.dmn", [("Season", "season", "string", '"Spring","Summer","Fall","Winter"')],
     [(['"Fall"'], ['"Stew"']), (['"Winter","Spring"'], ['"Roastbeef"']), (['not("Fall","Winter","Spring")'], ['"Salad"'])],
     [{"season": s} for s in ["Fall", "Winter", "Spring", "Summer", "Monsoon", ""]] + [{"season": 3}, {}]),
    ("g-types-boolean.dmn", [("Vip", "vip", "boolean", None)],
     [(["true"], ['"yes"']), (["false"], ['"no"'])],
     [{"vip": True}, {"vip": False}, {"vip": None}, {"vip": "true"}, {}]),
    ("g-types-date.dmn", [("Due", "date(due)", "date", None)],
     [(['< date("2024-01-01")'], ['"past"']), (['[date("2024-01-01")..date("2024-12-31")]'], ['"this year"']), (['> date("2024-12-31")'], ['"future"'])],
     [{"due": d} for d in ["2023-06-01", "2024-01-01", "2024-07-15", "2024-12-31", "2025-02-02"]] + [{"due": "nonsense"}]),
    ("g-types-duration.dmn", [("Wait", "duration(wait)", "dayTimeDuration", None)],
     [(['<= duration("PT1H")'], ['"short"']), (['> duration("PT1H")'], ['"long"'])],
     [{"wait": w} for w in ["PT5M", "PT1H", "PT2H", "P1D"]]),
    ("g-types-list.dmn", [("Items", "count(items)", "number", None), ("First", "items[1]", "string", None)],
     [(["0", "-"], ['"empty"']), (["> 0", '"a"'], ['"starts with a"']), (["> 0", 'not("a")'], ["items"])],
     [{"items": []}, {"items": ["a", "b"]}, {"items": ["b", "c"]}, {"items": ["c"]}]),
    ("g-types-expr-outputs.dmn", [("N", "n", "number", None)],
     [(["> 0"], ['{double: n * 2, text: string(n), list: [n, n + 1], date: date("2024-01-01") + duration("P" + string(n) + "D")}']),
      (["<= 0"], ['if n = 0 then null else {neg: true}'])],
     [{"n": v} for v in [1, 2.5, 0, -1, 100]]),
    ("g-types-question-mark.dmn", [("Name", "name", "string", None), ("Age", "age", "number", None)],
     [(['starts with(?, "A")', "? >= 18"], ['"adult A"']), (['ends with(?, "z")', "-"], ['"z"']), (['-', "? < 18 and ? > 0"], ['"minor"'])],
     [{"name": n, "age": a} for n in ["Anna", "Bob", "Liz"] for a in [10, 30]] + [{"name": "Anna"}]),
    ("g-types-contexts.dmn", [("Customer type", "customer.type", "string", None), ("Orders", "sum(customer.orders)", "number", None)],
     [(['"business"', "> 100"], ['"key account"']), (['"business"', "<= 100"], ['"business"']), (['"private"', "-"], ['"private"'])],
     [{"customer": {"type": t_, "orders": o}} for t_ in ["business", "private", "other"] for o in [[10, 20], [100, 200]]] + [{"customer": None}]),
    ("g-types-datetime.dmn", [("At", 'date and time(at)', "dateTime", None)],
     [(['< date and time("2024-06-01T00:00:00")'], ['"before"']), (['>= date and time("2024-06-01T00:00:00")'], ['"after"'])],
     [{"at": a} for a in ["2024-05-31T23:59:59", "2024-06-01T00:00:00", "2025-01-01T10:00:00"]]),
    ("g-types-time.dmn", [("At", 'time(at)', "time", None)],
     [(['[time("08:00:00")..time("17:00:00"))'], ['"open"']), (['< time("08:00:00"), >= time("17:00:00")'], ['"closed"'])],
     [{"at": a} for a in ["07:59:59", "08:00:00", "12:30:00", "17:00:00"]]),
]
for k, (fname, inputs, rules, varsets) in enumerate(TYPED):
    did = "decide"
    outputs = [("Result", "result", None, None)]
    rules = [(ins, outs) for ins, outs in rules]
    d = table(did, "Decide", "FIRST" if "question" in fname or "list" in fname else "UNIQUE", inputs, outputs, rules)
    write(fname, ver(k), [d])
    for v in varsets:
        case(fname, did, v)

# ---- inputs without labels (the name is the expression, cut to 30 characters), outputs without labels
d = table("unlabelled", "Unlabelled", "COLLECT",
          [(None, "a + b + c + d + e + f + g + h + i + j", "number", None), (None, "a", None, None)],
          [(None, "sum", "number", None)],
          [(["> 0", "-"], ["a + b + c + d + e + f + g + h + i + j"]), (["-", "1"], ["1"])])
write("g-unlabelled.dmn", "13", [d])
for a in [1, 2]:
    case("g-unlabelled.dmn", "unlabelled", {k: a for k in "abcdefghij"})

# ---- literal expressions, typed results
LITERALS = [
    ("sum", "a + b", ("total", "number"), [{"a": 1, "b": 2}, {"a": 1.5, "b": 2}, {"a": "x", "b": 1}, {}]),
    ("greet", '"Hello " + name', ("greeting", "string"), [{"name": "Ada"}, {"name": 5}, {}]),
    ("flag", "a > b", ("flag", "boolean"), [{"a": 2, "b": 1}, {"a": 1, "b": 2}, {"a": "x", "b": 2}]),
    ("day", "date(s)", ("day", "date"), [{"s": "2024-02-29"}, {"s": "x"}]),
    ("when", "date and time(s)", ("when", "dateTime"), [{"s": "2024-02-29T10:00:00"}, {"s": "2024-02-29T10:00:00+01:00"}, {"s": "2024-02-29T10:00:00@Europe/Berlin"}]),
    ("clock", "time(s)", ("clock", "time"), [{"s": "10:30:00"}, {"s": "10:30:00+02:00"}]),
    ("span", "duration(s)", ("span", "dayTimeDuration"), [{"s": "PT5M"}, {"s": "P2Y"}]),
    ("months", "duration(s)", ("months", "yearMonthDuration"), [{"s": "P2Y"}, {"s": "PT5M"}]),
    ("anything", "x", ("anything", "Any"), [{"x": 1}, {"x": [1, {"a": "b"}]}, {"x": None}]),
    ("notyped", "x", ("notyped", None), [{"x": "s"}, {"x": {"k": [1, 2]}}]),
    ("feelprefix", "x", ("feelprefix", "feel:number"), [{"x": 1}, {"x": "1"}]),
    ("list", "for i in 1..n return i * i", ("list", None), [{"n": 3}, {"n": 0}]),
    ("ctx", '{a: x, b: {c: x + 1}, d: [x]}', ("ctx", None), [{"x": 1}, {"x": "s"}]),
    ("filter", "items[price > 10].name", ("filter", None), [{"items": [{"name": "a", "price": 5}, {"name": "b", "price": 50}]}, {"items": []}]),
    ("assertion", 'assert(x, x > 3, "x must be greater than 3")', ("assertion", None), [{"x": 5}, {"x": 1}]),
    ("mathy", "decimal(x / 3, 4)", ("mathy", "number"), [{"x": 10}, {"x": 1}]),
    ("bignum", "x * 1000000000000", ("bignum", "number"), [{"x": 123456789}, {"x": 0.5}]),
]
for k, (did, expr, var, varsets) in enumerate(LITERALS):
    fname = f"g-literal-{did}.dmn"
    write(fname, "13" if did == "feelprefix" else ver(k), [literal(did, did.capitalize(), expr, var)])
    for v in varsets:
        case(fname, did, v)

# ---- required decisions: chains, diamonds, results bound by variable name or decision id
season = literal("season", "Season", 'if month in [3..5] then "Spring" else if month in [6..8] then "Summer" else if month in [9..11] then "Fall" else "Winter"', ("season", "string"))
guests = literal("guestCount", "Guest count", "adults + children", ("guests", "number"))
dish = table("dish", "Dish", "UNIQUE",
             [("Season", "season", "string", None), ("Guests", "guests", "number", None)],
             [("Dish", "dish", "string", None)],
             [(['"Fall"', "<= 8"], ['"Spareribs"']), (['"Winter"', "<= 8"], ['"Roastbeef"']), (['"Spring"', "<= 4"], ['"Dry Aged Gourmet Steak"']),
              (['"Spring"', "[5..8]"], ['"Steak"']), (['"Fall","Winter","Spring"', "> 8"], ['"Stew"']), (['"Summer"', "-"], ['"Light Salad and a nice Steak"'])],
             requires=("season", "guestCount"))
beverages = table("beverages", "Beverages", "COLLECT",
                  [("Dish", "dish", "string", None), ("Guests with children", "children > 0", "boolean", None)],
                  [("Beverages", "beverages", "string", None)],
                  [(['"Spareribs"', "-"], ['"Aecht Schlenkerla Rauchbier"']), (['"Stew"', "-"], ['"Guiness"']), (['"Roastbeef"', "-"], ['"Bordeaux"']),
                   (['"Steak","Dry Aged Gourmet Steak","Light Salad and a nice Steak"', "-"], ['"Pinot Noir"']), (["-", "true"], ['"Apple Juice"']), (["-", "-"], ['"Water"'])],
                  requires=("dish",))
summary = literal("summary", "Summary", 'dish + " with " + string join(beverages, ", ")', None, requires=("dish", "beverages"))
for k, v in enumerate(V):
    fname = f"g-required-dinner-{v}.dmn"
    write(fname, v, [summary, beverages, dish, season, guests] if k % 2 else [season, guests, dish, beverages, summary])
    months = [1, 4, 7, 10, 12] if k == 0 else [k * 2 + 1]
    for m in months:
        for adults, children in [(2, 0), (3, 2), (8, 4)]:
            for top in ["dish", "beverages", "summary", "season"]:
                case(fname, top, {"month": m, "adults": adults, "children": children})
    case(fname, "dish", {"month": 10})
    case(fname, "nosuchdecision", {"month": 10})

# diamond: a requires b and c, both require d (d is evaluated twice); a failing required decision
d_ = literal("d", "D", "x + 1")
b_ = literal("b", "B", "d * 2", requires=("d",))
c_ = literal("c", "C", "d * 3", requires=("d",))
a_ = table("a", "A", "COLLECT", [("B", "b", None, None), ("C", "c", None, None)], [("Out", "out", None, None)],
           [(["> 10", "-"], ['"b big"']), (["-", "> 10"], ['"c big"']), (["-", "-"], ["b + c"])], requires=("b", "c"))
write("g-required-diamond.dmn", "13", [a_, b_, c_, d_])
for x in [0, 2, 5, "s"]:
    for top in ["a", "b", "d"]:
        case("g-required-diamond.dmn", top, {"x": x})
# a variable of the same name as a required decision's result: the result wins
shadow = literal("shadowed", "Shadowed", "x * 10", ("x", "number"))
user = literal("user", "User", "x + 1", requires=("shadowed",))
write("g-required-shadow.dmn", "14", [user, shadow])
for x in [1, 2]:
    case("g-required-shadow.dmn", "user", {"x": x})
# failure inside a required decision (type check, assert, UNIQUE)
failing = literal("check", "Check", "x", ("check", "number"))
uses = literal("uses", "Uses", "check + 1", requires=("check",))
uniq = table("uniq", "Uniq", "UNIQUE", [("X", "x", None, None)], [("O", "o", None, None)], [(["> 0"], ["1"]), (["> 1"], ["2"])])
uses2 = literal("uses2", "Uses two", "uniq", requires=("uniq",))
write("g-required-failing.dmn", "15", [uses, failing, uniq, uses2])
for x in [1, "one", 5]:
    case("g-required-failing.dmn", "uses", {"x": x})
    case("g-required-failing.dmn", "uses2", {"x": x})

# long chain (20 deep)
chain = [literal(f"c{i}", f"Chain {i}", f"c{i + 1} + 1" if i < 20 else "start", requires=(f"c{i + 1}",) if i < 20 else ()) for i in range(21)]
write("g-required-chain.dmn", "13", chain)
case("g-required-chain.dmn", "c0", {"start": 1})
case("g-required-chain.dmn", "c15", {"start": 100})

# ---- evaluation failures inside tables: input expression, input entry, output entry
d = table("fails", "Fails", "RULE ORDER", [("X", 'assert(x, x != 0, "x is zero")', "number", None)], [("Y", "y", "number", None)],
          [(["> 0"], ['assert(x, x < 100, "x too big")']), (["-"], ["x * 2"]), (["< 0"], ['assert(x, x > -5)'])])
write("g-fail-inside.dmn", "13", [d])
for x in [0, 1, 200, -1, -10]:
    case("g-fail-inside.dmn", "fails", {"x": x})
d = table("entryfail", "Entry fails", "FIRST", [("X", "x", None, None)], [("Y", "y", None, None)],
          [(["> 0"], ['"pos"']), (['assert(x, x != 7, "seven")'], ['"passed"'])])
write("g-fail-entry.dmn", "13", [d])
for x in [1, 7, -7]:
    case("g-fail-entry.dmn", "entryfail", {"x": x})

# ---- default output entries (DMN 1.2+): no rule matched
def with_default(xml, output_index, expr):
    old = f'id="dflt_out{output_index}"'
    i = xml.index(old)
    end = xml.index("/>", i)
    return xml[:end] + f'>\n        <defaultOutputEntry id="dflt_d{output_index}">\n          <text>{t(expr)}</text>\n        </defaultOutputEntry>\n      </output>' + xml[end + 2:]


d = table("dflt", "Default", "UNIQUE", [("X", "x", None, None)], [("A", "a", None, None), ("B", "b", None, None)], [(["> 0"], ['"pos"', "1"])])
d = with_default(with_default(d, 0, '"none"'), 1, "x")
write("g-default-outputs.dmn", "13", [d])
for x in [1, -1]:
    case("g-default-outputs.dmn", "dflt", {"x": x})
d = table("dflt", "Default", "COLLECT", [("X", "x", None, None)], [("A", "a", None, None)], [(["> 0"], ['"pos"'])])
d = with_default(d, 0, '"none"')
write("g-default-single.dmn", "14", [d])
for x in [1, -1]:
    case("g-default-single.dmn", "dflt", {"x": x})

# ---- PRIORITY / OUTPUT ORDER: number output values, several outputs, values missing from the list, 10+ values
d = table("prio", "Priority", "PRIORITY", [("X", "x", None, None)], [("Level", "level", "number", "3, 1, 2"), ("Label", "label", "string", '"high","low"')],
          [(["> 0"], ["1", '"low"']), (["> 1"], ["2", '"high"']), (["> 2"], ["3", '"low"']), (["> 3"], ["4", '"high"']), (["> 4"], ["3", '"high"'])])
write("g-priority-numbers.dmn", "13", [d])
d2 = d.replace('hitPolicy="PRIORITY"', 'hitPolicy="OUTPUT ORDER"').replace('id="prio"', 'id="order"')
write("g-output-order-numbers.dmn", "12", [d2])
for x in range(0, 7):
    case("g-priority-numbers.dmn", "prio", {"x": x})
    case("g-output-order-numbers.dmn", "order", {"x": x})
vals = ",".join(f'"v{i}"' for i in range(12))
d = table("many", "Many", "PRIORITY", [("X", "x", None, None)], [("V", "v", "string", vals)],
          [([f"> {i}"], [f'"v{11 - i}"']) for i in range(12)])
write("g-priority-many-values.dmn", "13", [d])
for x in [0, 1, 2, 3, 5, 12]:
    case("g-priority-many-values.dmn", "many", {"x": x})

# ---- odd shapes: no rules, no inputs, no names or labels, several outputs of one name
d = table("norules", "No rules", "UNIQUE", [("X", "x", None, None)], [("O", "o", None, None)], [])
write("g-shape-no-rules.dmn", "13", [d])
case("g-shape-no-rules.dmn", "norules", {"x": 1})
for hit in ["UNIQUE", "FIRST", "COLLECT", "RULE ORDER"]:
    fname = f"g-shape-no-inputs-{hit.lower().replace(' ', '-')}.dmn"
    d = table("noinputs", "No inputs", hit, [], [("O", "o", None, None)], [([], ['"one"']), ([], ["x"])])
    write(fname, "14", [d])
    for x in ["one", "two"]:
        case(fname, "noinputs", {"x": x})
d = table("anon", "Anon", "RULE ORDER", [(None, "x", None, None)], [(None, None, None, None)], [(["> 0"], ["x"]), (["> 1"], ["x * 2"])])
write("g-shape-anonymous.dmn", "13", [d])
for x in [1, 2]:
    case("g-shape-anonymous.dmn", "anon", {"x": x})
write("g-invalid-decision-without-name.dmn", "13", [d.replace(' name="Anon"', "")])
parse_case("g-invalid-decision-without-name.dmn")
d = table("twice", "Twice", "RULE ORDER", [("X", "x", None, None)], [("A", "a", None, None), ("A again", "a", None, None)],
          [(["> 0"], ["1", "2"]), (["> 1"], ["3", "4"])])
write("g-shape-same-output-name.dmn", "13", [d])
for x in [1, 2]:
    case("g-shape-same-output-name.dmn", "twice", {"x": x})
d = table("unique3", "Unique three", "UNIQUE", [("X", "x", None, None)], [("A", "a", None, None), ("B", "b", None, None), ("C", "c", None, None)],
          [(["> 0"], ["1", '"b"', "[1, 2]"]), (["> 1"], ["2", "null", '{k: "v"}'])])
write("g-shape-unique-three-outputs.dmn", "13", [d])
for x in [1, 2]:
    case("g-shape-unique-three-outputs.dmn", "unique3", {"x": x})
d = table("anyeq", "Any equal", "ANY", [("X", "x", None, None)], [("A", "a", None, None), ("B", "b", None, None)],
          [(["> 0"], ["1", '"b"']), (["> 1"], ["1.0", '"b"']), (["> 2"], ["2", '"b"'])])
write("g-shape-any-equal.dmn", "13", [d])
for x in [1, 2, 3]:
    case("g-shape-any-equal.dmn", "anyeq", {"x": x})

# ---- numbers with trailing zeros, in messages and as output values
d = table("scaled", "Scaled", "UNIQUE", [("X", "x", None, None)], [("A", "a", None, None)], [(["> 0"], ["4.90"]), (["> 1"], ["1.0"]), (["> 2"], ["x / 4"])])
write("g-numbers-unique.dmn", "13", [d])
for x in [1, 2, 3, 10]:
    case("g-numbers-unique.dmn", "scaled", {"x": x})
d = table("scaledprio", "Scaled priority", "PRIORITY", [("X", "x", None, None)], [("A", "a", "number", "2.50, 1.0, 3, 0.5")],
          [(["> 0"], ["1.0"]), (["> 1"], ["2.50"]), (["> 2"], ["2.5"]), (["> 3"], ["1"]), (["> 4"], ["x / 10"])])
write("g-numbers-priority.dmn", "13", [d])
for x in [1, 2, 3, 4, 5]:
    case("g-numbers-priority.dmn", "scaledprio", {"x": x})
d = table("echo", "Echo", "UNIQUE", [("X", "x", None, None)], [("A", "a", None, None)], [(["-"], ["x"]), (["-"], ["[x, x * 2]"])])
write("g-numbers-variables.dmn", "13", [d])
for x in [2.0, 1.5, 0.1, 1e-7, 12345678901234567890, -0.0]:
    case("g-numbers-variables.dmn", "echo", {"x": x})

# ---- invalid DMN: each is refused by dmn-scala (the messages may differ)
lit = literal("d", "D", "1")
INVALID = {
    "g-invalid-cycle.dmn": [literal("a", "A", "b", requires=("b",)), literal("b", "B", "c", requires=("c",)), literal("c", "C", "a", requires=("a",))],
    "g-invalid-self-cycle.dmn": [literal("a", "A", "a", requires=("a",))],
    "g-invalid-feel-literal.dmn": [literal("d", "D", "1 +")],
    "g-invalid-feel-input-expression.dmn": [table("d", "D", None, [("X", "x >", None, None)], [("O", "o", None, None)], [(["1"], ["1"])])],
    "g-invalid-feel-input-entry.dmn": [table("d", "D", None, [("X", "x", None, None)], [("O", "o", None, None)], [(["< <"], ["1"])])],
    "g-invalid-feel-output-entry.dmn": [table("d", "D", None, [("X", "x", None, None)], [("O", "o", None, None)], [(["1"], ["if x then"])])],
    "g-invalid-empty-output-entry.dmn": [table("d", "D", None, [("X", "x", None, None)], [("O", "o", None, None)], [(["1"], [""])])],
    "g-invalid-no-output-name.dmn": [table("d", "D", None, [("X", "x", None, None)], [("O", "o", None, None), ("P", None, None, None)], [(["1"], ["1", "2"])])],
    "g-invalid-collect-compound.dmn": [table("d", "D", "COLLECT", [("X", "x", None, None)], [("O", "o", None, None), ("P", "p", None, None)], [(["1"], ["1", "2"])], aggregation="SUM")],
    "g-invalid-one-bad-among-good.dmn": [lit, literal("e", "E", "x ++ 1")],
}
for fname, decisions in INVALID.items():
    write(fname, "13", decisions)
    parse_case(fname)
    case(fname, "d", {"x": 1}, cid=f"{fname[:-4]} evaluate")
for k, v in enumerate(V):
    fname = f"g-invalid-cycle-{v}.dmn"
    write(fname, v, INVALID["g-invalid-cycle.dmn"])
    parse_case(fname)

# the same valid file in every DMN version
for v in V:
    fname = f"g-version-{v}.dmn"
    write(fname, v, [table("season", "Season", "UNIQUE", [("Month", "month", "number", None)], [("Season", "season", "string", None)],
                           [(["[3..5]"], ['"Spring"']), (["[6..8]"], ['"Summer"']), (["[9..11]"], ['"Fall"']), (["12, 1, 2"], ['"Winter"'])])])
    for m in [1, 4, 7, 10, 13]:
        case(fname, "season", {"month": m})

with open(os.path.join(CORPUS, "..", "cases.jsonl"), "w") as f:
    for c in cases:
        f.write(json.dumps(c, separators=(",", ":")) + "\n")
    with open(os.path.join(HERE, "hand-cases.jsonl")) as hand:
        n = 0
        for line in hand:
            if line.strip() and not line.startswith("#"):
                f.write(line if line.endswith("\n") else line + "\n")
                n += 1
print(f"{len(cases)} generated cases, {n} hand-written")
