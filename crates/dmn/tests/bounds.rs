//! The crate's bounds: cycles and deep or wide requirement graphs are refused with a clear
//! error (never a stack overflow), and big files are refused at parse time.

use waggle_dmn::{parse, MAX_DECISIONS, MAX_EVALUATED_DECISIONS, MAX_REQUIREMENT_DEPTH, MAX_RULES};
use waggle_feel::{Context, EvalContext, Value};

fn definitions(body: &str) -> String {
    format!(r#"<definitions xmlns="https://www.omg.org/spec/DMN/20191111/MODEL/" id="defs" name="D" namespace="n">{body}</definitions>"#)
}

fn literal(id: &str, expr: &str, requires: &[String]) -> String {
    let reqs: String = requires
        .iter()
        .map(|r| format!(r##"<informationRequirement id="{id}_{r}"><requiredDecision href="#{r}"/></informationRequirement>"##))
        .collect();
    format!(r#"<decision id="{id}" name="{id}">{reqs}<literalExpression id="{id}_e"><text>{expr}</text></literalExpression></decision>"#)
}

#[test]
fn a_cycle_is_a_parse_error_naming_it() {
    let xml = definitions(&format!(
        "{}{}{}{}",
        literal("a", "b", &["b".into()]),
        literal("b", "c", &["c".into()]),
        literal("c", "a", &["a".into()]),
        literal("free", "1", &[])
    ));
    let err = parse(&xml).unwrap_err();
    assert!(err.message.starts_with("Invalid DMN model: Cyclic dependencies between decisions detected."), "{err}");
    assert!(err.message.contains("a requires b requires c requires a"), "{err}");
}

#[test]
fn a_chain_at_the_depth_limit_evaluates_and_one_beyond_is_refused() {
    let chain = |len: usize| {
        let body: String = (0..=len)
            .map(|i| {
                if i < len {
                    literal(&format!("c{i}"), &format!("c{} + 1", i + 1), &[format!("c{}", i + 1)])
                } else {
                    literal(&format!("c{i}"), "0", &[])
                }
            })
            .collect();
        definitions(&body)
    };
    let drg = parse(&chain(MAX_REQUIREMENT_DEPTH)).expect("at the limit");
    let result = drg.evaluate("c0", &(), &EvalContext::default());
    assert_eq!(result.failure, None);
    assert_eq!(result.output, Value::from(MAX_REQUIREMENT_DEPTH as i64));
    assert_eq!(result.evaluated.len(), MAX_REQUIREMENT_DEPTH + 1);
    let err = parse(&chain(MAX_REQUIREMENT_DEPTH + 1)).unwrap_err();
    assert!(err.message.contains("chain of more than"), "{err}");
}

#[test]
fn shared_requirements_that_multiply_evaluations_fail_the_evaluation() {
    // layer i requires both decisions of layer i + 1: 2^20 evaluations without sharing
    let mut body = String::new();
    let layers = 20;
    for i in 0..layers {
        let next: Vec<String> = if i + 1 < layers { vec![format!("l{}a", i + 1), format!("l{}b", i + 1)] } else { vec![] };
        for side in ["a", "b"] {
            body.push_str(&literal(&format!("l{i}{side}"), "1", &next));
        }
    }
    let drg = parse(&definitions(&body)).expect("parses");
    let result = drg.evaluate("l0a", &(), &EvalContext::default());
    let failure = result.failure.expect("fails");
    assert!(failure.message.contains(&format!("more than {MAX_EVALUATED_DECISIONS} decision evaluations")), "{failure:?}");
    assert!(result.evaluated.len() <= MAX_EVALUATED_DECISIONS);
}

#[test]
fn too_many_decisions_or_rules_are_refused() {
    let body: String = (0..=MAX_DECISIONS).map(|i| literal(&format!("d{i}"), "1", &[])).collect();
    assert!(parse(&definitions(&body)).unwrap_err().message.contains("decisions"));
    let rules: String = (0..=MAX_RULES)
        .map(|i| format!(r#"<rule id="r{i}"><inputEntry id="r{i}i"><text>{i}</text></inputEntry><outputEntry id="r{i}o"><text>{i}</text></outputEntry></rule>"#))
        .collect();
    let table = format!(
        r#"<decision id="t" name="t"><decisionTable id="dt"><input id="in"><inputExpression id="ie"><text>x</text></inputExpression></input><output id="o" name="o"/>{rules}</decisionTable></decision>"#
    );
    assert!(parse(&definitions(&table)).unwrap_err().message.contains("rules"));
}

#[test]
fn evaluates_a_decision_by_id_with_a_feel_context_as_variables() {
    let xml = definitions(
        r#"<decision id="greet" name="Greet"><decisionTable id="dt" hitPolicy="FIRST">
             <input id="in" label="Name"><inputExpression id="ie"><text>name</text></inputExpression></input>
             <output id="o" label="Greeting" name="greeting"/>
             <rule id="r1"><inputEntry id="r1i"><text>"Ada"</text></inputEntry><outputEntry id="r1o"><text>"Hi Ada"</text></outputEntry></rule>
             <rule id="r2"><inputEntry id="r2i"><text>-</text></inputEntry><outputEntry id="r2o"><text>"Hello " + name</text></outputEntry></rule>
           </decisionTable></decision>"#,
    );
    let drg = parse(&xml).expect("parses");
    assert_eq!(drg.id, "defs");
    assert_eq!(drg.decisions().len(), 1);
    let mut vars = Context::new();
    vars.insert("name", Value::string("Bob"));
    let result = drg.evaluate("greet", &vars, &EvalContext::default());
    assert_eq!(result.output, Value::string("Hello Bob"));
    let d = &result.evaluated[0];
    assert_eq!((d.decision_id.as_str(), d.decision_type), ("greet", "DECISION_TABLE"));
    assert_eq!(d.inputs[0].input_name.as_deref(), Some("Name"));
    assert_eq!(d.matched_rules[0].rule_index, 2);
    assert_eq!(d.matched_rules[0].outputs[0].output_name.as_deref(), Some("Greeting"));
    let missing = drg.evaluate("nope", &vars, &EvalContext::default());
    let failure = missing.failure.expect("fails");
    assert_eq!(failure.message, "Expected to evaluate decision 'nope', but no decision found with id 'nope'");
    assert_eq!(failure.failed_decision_id, "nope");
}

#[test]
fn deeply_nested_xml_is_refused_without_overflowing_the_stack() {
    let depth = 200_000;
    let xml = definitions(&format!(
        r#"<decision id="d" name="d"><extensionElements>{}{}</extensionElements><literalExpression id="e"><text>1</text></literalExpression></decision>"#,
        "<x>".repeat(depth),
        "</x>".repeat(depth)
    ));
    let err = parse(&xml).unwrap_err();
    assert!(err.message.contains("nested more than"), "{err}");
    // at the limit it parses (the document's own 4 levels included)
    let ok = definitions(&format!(
        r#"<decision id="d" name="d"><extensionElements>{}{}</extensionElements><literalExpression id="e"><text>1</text></literalExpression></decision>"#,
        "<x a='>'><!-- <y> --><![CDATA[<z>]]>".repeat(waggle_dmn::MAX_XML_DEPTH - 3),
        "</x>".repeat(waggle_dmn::MAX_XML_DEPTH - 3)
    ));
    assert!(parse(&ok).is_ok());
}

#[test]
fn a_parsed_drg_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<waggle_dmn::Drg>();
}
