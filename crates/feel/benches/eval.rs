//! Evaluation benchmarks (criterion): `cargo bench -p waggle-feel -- --warm-up-time 1
//! --measurement-time 3`. Figures are in crates/feel/README.md.

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use waggle_feel::{Expression, Value, VariableLookup};

/// A small scope as a caller may keep one: a few variables, looked up by linear search (no
/// hashing).
struct SmallScope(Vec<(String, Value)>);

impl VariableLookup for SmallScope {
    fn lookup(&self, name: &str) -> Option<Value> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
    }
}

/// A JSON document of about 46 KB: 266 orders with items and a customer each.
fn document() -> serde_json::Value {
    let orders: Vec<serde_json::Value> = (0..266)
        .map(|i| {
            serde_json::json!({
                "id": format!("order-{i:05}"),
                "customer": {"name": format!("Customer {i}"), "tier": if i % 3 == 0 { "gold" } else { "silver" }},
                "items": (0..2).map(|k| serde_json::json!({"sku": format!("SKU-{i}-{k}"), "price": i * 10 + k, "qty": k + 1})).collect::<Vec<_>>(),
                "paid": i % 2 == 0
            })
        })
        .collect();
    serde_json::json!({ "orders": orders })
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("feel");
    g.throughput(Throughput::Elements(1));

    let simple = Expression::parse("x > 5 and y = \"a\"").expect("parse");
    let scope: HashMap<String, Value> = [("x".to_string(), Value::number(7)), ("y".to_string(), Value::string("a"))].into();
    assert_eq!(simple.evaluate(&scope), Value::Bool(true));
    g.bench_function("simple condition (HashMap scope)", |b| b.iter(|| black_box(simple.evaluate(black_box(&scope)))));
    let small = SmallScope(vec![("x".to_string(), Value::number(7)), ("y".to_string(), Value::string("a"))]);
    g.bench_function("simple condition (small scope)", |b| b.iter(|| black_box(simple.evaluate(black_box(&small)))));

    let doc = document();
    let size = doc.to_string().len();
    assert!((40_000..52_000).contains(&size), "document is {size} bytes");
    let doc_scope: HashMap<String, Value> = [("doc".to_string(), Value::from_json(&doc))].into();
    let path = Expression::parse("doc.orders[150].items[2].price").expect("parse");
    assert_eq!(path.evaluate(&doc_scope), Value::number(1491));
    g.bench_function("path into a 46 KB document", |b| b.iter(|| black_box(path.evaluate(black_box(&doc_scope)))));

    let items: HashMap<String, Value> = [("xs".to_string(), Value::List((0..1000).map(Value::number).collect()))].into();
    let for_expr = Expression::parse("for x in xs return x * 2").expect("parse");
    assert!(matches!(for_expr.evaluate(&items), Value::List(l) if l.len() == 1000));
    g.bench_function("for over 1,000 items", |b| b.iter(|| black_box(for_expr.evaluate(black_box(&items)))));

    let times: HashMap<String, Value> = [("start".to_string(), Value::string("2024-06-01T10:00:00+02:00"))].into();
    let dt = Expression::parse("date and time(start) < date and time(\"2024-06-01T12:00:00@Europe/Berlin\")").expect("parse");
    assert_eq!(dt.evaluate(&times), Value::Bool(true));
    g.bench_function("date and time comparison", |b| b.iter(|| black_box(dt.evaluate(black_box(&times)))));
    g.finish();
}

criterion_group!(feel, benches);
criterion_main!(feel);
