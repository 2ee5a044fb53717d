use super::*;

fn model(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" xmlns:zeebe="http://camunda.org/schema/zeebe/1.0" id="d">
  <bpmn:process id="p" name="P" isExecutable="true">
{body}
  </bpmn:process>
</bpmn:definitions>"#
    )
}

const TASK: &str = r#"
    <bpmn:startEvent id="start" />
    <bpmn:serviceTask id="task" name="Task">
      <bpmn:extensionElements>
        <zeebe:taskDefinition type="work" retries="5" />
        <zeebe:taskHeaders><zeebe:header key="k" value="v" /></zeebe:taskHeaders>
        <zeebe:ioMapping>
          <zeebe:input source="=order.id" target="orderId" />
          <zeebe:output source="=result" target="out.value" />
        </zeebe:ioMapping>
      </bpmn:extensionElements>
    </bpmn:serviceTask>
    <bpmn:endEvent id="end" />
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="task" />
    <bpmn:sequenceFlow id="f2" sourceRef="task" targetRef="end" />"#;

fn errors(xml: &str) -> Vec<BpmnError> {
    parse_definitions(xml.as_bytes()).expect_err("should be rejected")
}

#[test]
fn parses_a_service_task_process_linked_by_index() {
    let processes = parse_definitions(model(TASK).as_bytes()).unwrap();
    assert_eq!(processes.len(), 1);
    let p = &processes[0];
    assert_eq!((p.id.as_str(), p.name.as_deref()), ("p", Some("P")));
    assert_eq!(p.elements[p.start.unwrap()].id, "start");
    let task = &p.elements[p.element("task").unwrap()];
    let ElementKind::ServiceTask(def) = &task.kind else { panic!("not a task") };
    assert!(matches!(&def.job_type, ExprOrStatic::Static(t) if t == "work"));
    assert!(matches!(&def.retries, ExprOrStatic::Static(r) if r == "5"));
    assert!(matches!(def.headers.as_slice(), [(k, ExprOrStatic::Static(v))] if k == "k" && v == "v"));
    assert_eq!(task.inputs[0].source.source(), "order.id");
    assert_eq!(task.outputs[0].target, "out.value");
    assert_eq!(p.flows[task.incoming[0]].id, "f1");
    assert_eq!(p.elements[p.flows[task.outgoing[0]].target].id, "end");
    assert_eq!(task.kind.bpmn_element_type(), "SERVICE_TASK");
}

#[test]
fn exclusive_gateway_gets_conditions_and_default_flow() {
    let xml = model(
        r#"
    <bpmn:startEvent id="start" />
    <bpmn:exclusiveGateway id="gw" default="low" />
    <bpmn:endEvent id="a" /><bpmn:endEvent id="b" />
    <bpmn:sequenceFlow id="f0" sourceRef="start" targetRef="gw" />
    <bpmn:sequenceFlow id="high" sourceRef="gw" targetRef="a">
      <bpmn:conditionExpression xsi:type="bpmn:tFormalExpression" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">= x &gt; 5</bpmn:conditionExpression>
    </bpmn:sequenceFlow>
    <bpmn:sequenceFlow id="low" sourceRef="gw" targetRef="b" />"#,
    );
    let p = &parse_definitions(xml.as_bytes()).unwrap()[0];
    let gw = &p.elements[p.element("gw").unwrap()];
    let ElementKind::ExclusiveGateway { default_flow: Some(d) } = gw.kind else { panic!("no default") };
    assert_eq!(p.flows[d].id, "low");
    let high = p.flows.iter().find(|f| f.id == "high").unwrap();
    assert_eq!(high.condition.as_ref().unwrap().source(), "x > 5");
}

#[test]
fn unsupported_elements_are_rejected_by_name_and_line() {
    let xml = model(
        r#"    <bpmn:startEvent id="start" />
    <bpmn:complexGateway id="approve" />"#,
    );
    let errs = errors(&xml);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].element_id, "approve");
    assert_eq!(errs[0].line, 5);
    assert!(errs[0].message.contains("'complexGateway'"), "{}", errs[0].message);
    assert_eq!(
        errs[0].to_string(),
        "- Element: approve (line 5)\n    - ERROR: Elements of type 'complexGateway' are currently not supported"
    );
}

#[test]
fn call_activities_name_the_called_process_and_its_binding() {
    let xml = model(
        r#"    <bpmn:startEvent id="start" />
    <bpmn:callActivity id="call">
      <bpmn:extensionElements>
        <zeebe:calledElement processId="=child" bindingType="versionTag" versionTag="v2" propagateAllChildVariables="false" />
      </bpmn:extensionElements>
    </bpmn:callActivity>
    <bpmn:boundaryEvent id="timeout" attachedToRef="call"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1M</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="call" />"#,
    );
    let p = &parse_definitions(xml.as_bytes()).unwrap()[0];
    let call = &p.elements[p.element("call").unwrap()];
    let ElementKind::CallActivity(called) = &call.kind else { panic!("not a call activity: {:?}", call.kind) };
    assert!(matches!(&called.process_id, ExprOrStatic::Expression(e) if e.source() == "child"));
    assert_eq!(called.binding, CalledBinding::VersionTag("v2".into()));
    assert!(!called.propagate_all_child_variables && called.propagate_all_parent_variables);
    assert_eq!(call.kind.bpmn_element_type(), "CALL_ACTIVITY");
    assert_eq!(call.boundary_events.len(), 1, "boundary events attach to call activities");

    for (called, message) in [
        ("", "Must have exactly one 'zeebe:calledElement' extension element"),
        (r#"<zeebe:calledElement processId=" " />"#, "Attribute 'processId' must be present and not empty"),
        (r#"<zeebe:calledElement processId="c" bindingType="versionTag" />"#, "Attribute 'versionTag' must be present"),
        (r#"<zeebe:calledElement processId="c" bindingType="newest" />"#, "but was 'newest'"),
    ] {
        let xml = model(&format!(
            r#"    <bpmn:startEvent id="start" />
    <bpmn:callActivity id="call"><bpmn:extensionElements>{called}</bpmn:extensionElements></bpmn:callActivity>"#
        ));
        let errs = errors(&xml);
        assert!(errs.iter().any(|e| e.element_id == "call" && e.message.contains(message)), "{called}: {errs:?}");
    }
}

#[test]
fn event_definitions_are_rejected() {
    let xml = model(r#"    <bpmn:startEvent id="start"><bpmn:timerEventDefinition /></bpmn:startEvent>"#);
    let errs = errors(&xml);
    assert!(errs.iter().any(|e| e.element_id == "start" && e.message.contains("timeDuration")), "{errs:?}");
    let xml = model(
        r#"    <bpmn:startEvent id="start" />
    <bpmn:endEvent id="undo"><bpmn:cancelEventDefinition /></bpmn:endEvent>"#,
    );
    let errs = errors(&xml);
    assert!(errs.iter().any(|e| e.element_id == "undo" && e.message.contains("cancelEventDefinition")), "{errs:?}");
}

#[test]
fn service_task_without_definition_and_bad_feel_are_all_reported() {
    let xml = model(
        r#"    <bpmn:startEvent id="start" />
    <bpmn:serviceTask id="t1" />
    <bpmn:serviceTask id="t2"><bpmn:extensionElements><zeebe:taskDefinition type="= a +" /></bpmn:extensionElements></bpmn:serviceTask>"#,
    );
    let errs = errors(&xml);
    assert!(errs.iter().any(|e| e.element_id == "t1" && e.message == "Must have exactly one 'zeebe:taskDefinition' extension element"));
    assert!(errs.iter().any(|e| e.element_id == "t2" && e.message.starts_with("failed to parse expression 'a +'")), "{errs:?}");
}

#[test]
fn gateway_flow_without_condition_or_default_is_rejected() {
    let xml = model(
        r#"    <bpmn:startEvent id="start" />
    <bpmn:exclusiveGateway id="gw" />
    <bpmn:endEvent id="a" /><bpmn:endEvent id="b" />
    <bpmn:sequenceFlow id="f0" sourceRef="start" targetRef="gw" />
    <bpmn:sequenceFlow id="fa" sourceRef="gw" targetRef="a" />
    <bpmn:sequenceFlow id="fb" sourceRef="gw" targetRef="b" />"#,
    );
    let errs = errors(&xml);
    assert_eq!(errs.iter().filter(|e| e.element_id == "fa" || e.element_id == "fb").count(), 2, "{errs:?}");
}

#[test]
fn invalid_xml_names_the_line() {
    let errs = errors(
        "<bpmn:definitions xmlns:bpmn=\"http://www.omg.org/spec/BPMN/20100524/MODEL\">\n  <bpmn:process id=\"x\">\n</bpmn:definitions>",
    );
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].line, 3);
    assert!(errs[0].message.starts_with("Invalid XML"));
}

#[test]
fn missing_start_event_and_no_executable_process() {
    let errs = errors(&model(r#"    <bpmn:endEvent id="end" />"#));
    assert_eq!(errs[0].message, "Must have at least one start event");
    let xml = model("    <bpmn:startEvent id=\"s\" />").replace("isExecutable=\"true\"", "isExecutable=\"false\"");
    assert_eq!(errors(&xml)[0].message, "Must contain at least one executable process");
}

#[test]
fn dangling_flow_reference_is_rejected() {
    let xml = model(
        r#"    <bpmn:startEvent id="start" />
    <bpmn:sequenceFlow id="f" sourceRef="start" targetRef="nowhere" />"#,
    );
    assert!(errors(&xml).iter().any(|e| e.element_id == "f" && e.message.contains("'nowhere'")));
}

#[test]
fn static_mapping_source_is_rejected_and_missing_source_maps_the_target() {
    let xml = model(&TASK.replace("source=\"=result\"", "source=\"result\""));
    assert!(errors(&xml)[0].message.starts_with("Expected expression but found static value 'result'"));
    let xml = model(&TASK.replace("source=\"=result\" ", ""));
    let p = &parse_definitions(xml.as_bytes()).unwrap()[0];
    assert_eq!(p.elements[p.element("task").unwrap()].outputs[0].source.source(), "out.value");
}

#[test]
fn mappings_are_one_context_as_zeebe_builds_it() {
    let with_output =
        |source: &str| TASK.replace(r#"source="=result" target="out.value""#, &format!(r#"source="{source}" target="out.value""#));
    // a `//` comment at the end of a source swallows the context's closing brace
    let errs = errors(&model(&with_output("=1 + 2 // comment")));
    assert!(errs.iter().any(|e| e.message.contains("Failed to build variable mapping expression")), "{errs:?}");
    // a closed comment, or one ended by a line break inside the source, deploys
    assert!(parse_definitions(model(&with_output("=1 + 2 /* comment */")).as_bytes()).is_ok());
    assert!(parse_definitions(model(&with_output("=1 + // comment&#10;2")).as_bytes()).is_ok());
    let mappings = |pairs: &[(&str, &str)]| -> Vec<Mapping> {
        pairs.iter().map(|(t, s)| Mapping { source: Expression::parse(s).unwrap(), target: t.to_string() }).collect()
    };
    assert_eq!(mapping_context(&mappings(&[("a", "x"), ("b.c", "y"), ("b.d", "z + 1")])), "{a:x,b:{c:y,d:z + 1}}");
}

/// `depth` embedded subprocesses, each inside the one before, each with a start and end event
/// (the innermost holds a service task of type `work`).
fn nested_subprocesses(depth: usize) -> String {
    let mut body = String::from(r#"<bpmn:startEvent id="start" />"#);
    for i in 0..depth {
        body.push_str(&format!(r#"<bpmn:subProcess id="sub{i}"><bpmn:startEvent id="s{i}" />"#));
    }
    body.push_str(r#"<bpmn:serviceTask id="task"><bpmn:extensionElements><zeebe:taskDefinition type="work" /></bpmn:extensionElements></bpmn:serviceTask>"#);
    for i in (0..depth).rev() {
        let first = if i + 1 < depth { format!("sub{}", i + 1) } else { "task".to_string() };
        body.push_str(&format!(
            r#"<bpmn:endEvent id="e{i}" /><bpmn:sequenceFlow id="a{i}" sourceRef="s{i}" targetRef="{first}" /><bpmn:sequenceFlow id="b{i}" sourceRef="{first}" targetRef="e{i}" /></bpmn:subProcess>"#
        ));
    }
    let first = if depth > 0 { "sub0" } else { "task" };
    body.push_str(&format!(r#"<bpmn:endEvent id="end" /><bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="{first}" /><bpmn:sequenceFlow id="f2" sourceRef="{first}" targetRef="end" />"#));
    model(&body)
}

#[test]
fn nesting_deeper_than_the_limit_is_rejected_naming_it() {
    // 50,000 levels: the recursive walk over subprocesses overflowed the stack before
    let errs = errors(&nested_subprocesses(50_000));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].message.contains("limit of 100 levels (max_bpmn_element_depth)"), "{}", errs[0].message);
    assert_eq!(errs[0].element_id, "definitions", "refused before parsing");
    // the limit is the configured one, and nesting within it is accepted
    let limits = ParseLimits { max_element_depth: 20 };
    assert!(parse_definitions_with(nested_subprocesses(15).as_bytes(), &limits).is_ok());
    let errs = parse_definitions_with(nested_subprocesses(25).as_bytes(), &limits).unwrap_err();
    assert!(errs[0].message.contains("limit of 20 levels"), "{errs:?}");
}

#[test]
fn nesting_up_to_the_ceiling_parses() {
    let depth = ParseLimits::MAX_ELEMENT_DEPTH_CEILING - 10;
    let processes = parse_definitions_with(nested_subprocesses(depth).as_bytes(), &ParseLimits::CEILING).unwrap();
    let p = &processes[0];
    let task = p.element("task").unwrap();
    assert_eq!(p.elements[task].scope, p.element(&format!("sub{}", depth - 1)));
}

#[test]
fn many_flows_and_subprocesses_parse_in_linear_time() {
    // 20,000 sibling subprocesses and 60,000 flows on as many lines: finding each line from the
    // document's start, and each scope's start event among all elements, was quadratic
    let mut body = String::from("<bpmn:startEvent id=\"start\" />\n");
    let mut previous = "start".to_string();
    for i in 0..20_000 {
        body.push_str(&format!(
            "<bpmn:subProcess id=\"sub{i}\"><bpmn:startEvent id=\"s{i}\" /><bpmn:endEvent id=\"e{i}\" />\n<bpmn:sequenceFlow id=\"i{i}\" sourceRef=\"s{i}\" targetRef=\"e{i}\" /></bpmn:subProcess>\n<bpmn:sequenceFlow id=\"f{i}\" sourceRef=\"{previous}\" targetRef=\"sub{i}\" />\n"
        ));
        previous = format!("sub{i}");
    }
    let started = std::time::Instant::now();
    let processes = parse_definitions(model(&body).as_bytes()).unwrap();
    assert_eq!(processes[0].elements.len(), 60_001);
    eprintln!("parsed 20,000 subprocesses in {:?}", started.elapsed());
}

#[test]
fn a_mapping_target_of_too_many_segments_is_rejected() {
    let target = vec!["a"; MAX_TARGET_PATH_SEGMENTS + 1].join(".");
    let body = TASK.replace("target=\"out.value\"", &format!("target=\"{target}\""));
    let errs = errors(&model(&body));
    assert!(errs[0].message.contains("more than 100 path segments"), "{errs:?}");
    let target = vec!["a"; MAX_TARGET_PATH_SEGMENTS].join(".");
    assert!(parse_definitions(model(&TASK.replace("target=\"out.value\"", &format!("target=\"{target}\""))).as_bytes()).is_ok());
}

#[test]
fn a_feel_expression_nested_too_deeply_is_rejected_naming_the_limit() {
    let deep = format!("={}1{}", "(".repeat(50_000), ")".repeat(50_000));
    let body = TASK.replace("source=\"=order.id\"", &format!("source=\"{deep}\""));
    let errs = errors(&model(&body));
    assert!(
        errs[0].message.contains("more than 300 levels of nested sub-expressions (FEEL's nesting limit)"),
        "{}",
        &errs[0].message[..400]
    );
    assert!(errs[0].message.len() < 1_000, "the expression is quoted cut: {}", errs[0].message.len());
    // a long chain nests the syntax tree as deeply as parentheses do
    let chain = format!("={}", vec!["1"; 100_000].join("+"));
    let errs = errors(&model(&TASK.replace("source=\"=order.id\"", &format!("source=\"{chain}\""))));
    assert!(errs[0].message.contains("FEEL's nesting limit"), "{}", &errs[0].message[..400]);
}

/// xorshift64*: a small deterministic generator for the property test below.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// A scope's contents `levels` subprocesses deep (ids numbered by `next`), with random
/// siblings, documentation, comments, CDATA and attribute values holding markup characters;
/// returns the XML and the depth of its deepest element below the scope.
fn random_scope(rng: &mut Rng, levels: usize, next: &mut usize) -> (String, usize) {
    *next += 1;
    let n = *next;
    let mut xml = format!("<bpmn:startEvent id=\"s{n}\" name=\"a &gt; b /&gt; '\" />");
    let mut deepest = 1;
    for _ in 0..rng.below(3) {
        match rng.below(4) {
            0 => xml.push_str("<!-- <bpmn:subProcess><bpmn:subProcess> -->"),
            1 => {
                xml.push_str("<bpmn:documentation><![CDATA[<a><b><c>]]></bpmn:documentation>");
            }
            2 => {
                *next += 1;
                xml.push_str(&format!(
                    "<bpmn:serviceTask id=\"t{}\"><bpmn:extensionElements><zeebe:taskDefinition type=\"x/>y\" /></bpmn:extensionElements></bpmn:serviceTask>",
                    *next
                ));
                deepest = deepest.max(3);
            }
            _ => {
                *next += 1;
                xml.push_str(&format!("<bpmn:endEvent id=\"e{}\" />", *next));
            }
        }
    }
    if levels > 0 {
        let (inner, inner_depth) = random_scope(rng, levels - 1, next);
        xml.push_str(&format!("<bpmn:subProcess id=\"p{n}\">{inner}</bpmn:subProcess>"));
        xml.push_str(&format!("<bpmn:sequenceFlow id=\"f{n}\" sourceRef=\"s{n}\" targetRef=\"p{n}\" />"));
        deepest = deepest.max(inner_depth + 1);
    }
    (xml, deepest)
}

/// Random nesting depths and shapes against random limits, some documents cut short or with a
/// byte changed: the parse never panics, accepts a document within its limit, and rejects
/// one beyond it naming the limit.
#[test]
fn random_nesting_is_accepted_within_the_limit_and_rejected_beyond_it() {
    let mut rng = Rng(0x0B9A_4E57);
    for case in 0..400 {
        let levels = [0, 1, 2, 5, 20, 90, 200, 600][rng.below(8) as usize] as usize;
        let (scope, below) = random_scope(&mut rng, levels, &mut 0);
        let xml = model(&scope);
        // definitions and process hold the scope
        let depth = below + 2;
        let limits = ParseLimits { max_element_depth: 3 + rng.below(300) as usize };
        match rng.below(8) {
            0 => {
                let cut = rng.below(xml.len() as u64) as usize;
                let _ = parse_definitions_with(&xml.as_bytes()[..cut], &limits);
            }
            1 => {
                let mut bytes = xml.clone().into_bytes();
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] = b"<>/\"'&!?["[rng.below(9) as usize];
                let _ = parse_definitions_with(&bytes, &limits);
            }
            _ => match parse_definitions_with(xml.as_bytes(), &limits) {
                Ok(_) => assert!(depth <= limits.max_element_depth, "case {case}: depth {depth} accepted beyond {limits:?}"),
                Err(errors) if depth > limits.max_element_depth => {
                    assert!(errors[0].message.contains("(max_bpmn_element_depth)"), "case {case}: {errors:?}")
                }
                Err(errors) => panic!("case {case}: depth {depth} within {limits:?} rejected: {errors:?}"),
            },
        }
    }
}

/// A service task with `mi` as its loop characteristics.
fn multi_instance_task(mi: &str) -> String {
    model(&format!(
        r#"
    <bpmn:startEvent id="start" />
    <bpmn:serviceTask id="task">
      <bpmn:extensionElements><zeebe:taskDefinition type="work" /></bpmn:extensionElements>
      {mi}
    </bpmn:serviceTask>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="task" />"#
    ))
}

#[test]
fn multi_instance_service_tasks_parse_their_loop_characteristics() {
    let xml = multi_instance_task(
        r#"<bpmn:multiInstanceLoopCharacteristics isSequential="true">
        <bpmn:extensionElements><zeebe:loopCharacteristics inputCollection="=items" inputElement="item" outputCollection="results" outputElement="=result" /></bpmn:extensionElements>
        <bpmn:completionCondition>=numberOfCompletedInstances &gt; 1</bpmn:completionCondition>
      </bpmn:multiInstanceLoopCharacteristics>"#,
    );
    let p = &parse_definitions(xml.as_bytes()).unwrap()[0];
    let task = &p.elements[p.element("task").unwrap()];
    let mi = task.multi_instance.as_ref().expect("multi-instance");
    assert!(mi.sequential);
    assert_eq!(mi.input_collection.source(), "items");
    assert_eq!(mi.input_element.as_deref(), Some("item"));
    assert_eq!(mi.output_collection.as_deref(), Some("results"));
    assert_eq!(mi.output_element.as_ref().map(|e| e.source()), Some("result"));
    assert_eq!(mi.completion_condition.as_ref().map(|e| e.source()), Some("numberOfCompletedInstances > 1"));
    assert_eq!(task.entered_type(), "MULTI_INSTANCE_BODY");
    assert_eq!(task.kind.bpmn_element_type(), "SERVICE_TASK");
}

#[test]
fn multi_instance_without_input_collection_or_with_half_an_output_is_rejected() {
    let missing = multi_instance_task(r#"<bpmn:multiInstanceLoopCharacteristics />"#);
    assert!(errors(&missing)[0].message.contains("zeebe:loopCharacteristics"), "{:?}", errors(&missing));
    let half = multi_instance_task(
        r#"<bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements>
        <zeebe:loopCharacteristics inputCollection="=items" outputCollection="results" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics>"#,
    );
    assert!(errors(&half)[0].message.contains("'outputCollection' and 'outputElement'"), "{:?}", errors(&half));
    let static_collection = multi_instance_task(
        r#"<bpmn:multiInstanceLoopCharacteristics><bpmn:extensionElements>
        <zeebe:loopCharacteristics inputCollection="items" /></bpmn:extensionElements></bpmn:multiInstanceLoopCharacteristics>"#,
    );
    assert!(errors(&static_collection)[0].message.contains("Expected expression"), "{:?}", errors(&static_collection));
}

#[test]
fn loops_and_multi_instance_on_non_activities_are_still_rejected() {
    let standard = multi_instance_task("<bpmn:standardLoopCharacteristics />");
    assert!(errors(&standard)[0].message.contains("'standardLoopCharacteristics' (multi-instance and loops) is currently not supported"));
    let gateway = model(
        r#"
    <bpmn:startEvent id="start" />
    <bpmn:exclusiveGateway id="task"><bpmn:multiInstanceLoopCharacteristics /></bpmn:exclusiveGateway>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="task" />"#,
    );
    assert!(errors(&gateway).iter().any(|e| e.message.contains("'multiInstanceLoopCharacteristics' (multi-instance and loops)")));
}

/// Zeebe 8.5's deploy-time checks of compensation (its engine test
/// `bpmn/compensation/CompensationEventTest.java`).
#[test]
fn compensation_is_linked_and_checked() {
    let ok = model(
        r#"    <bpmn:startEvent id="start" />
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="A" />
    <bpmn:task id="A" />
    <bpmn:boundaryEvent id="b" attachedToRef="A"><bpmn:compensateEventDefinition /></bpmn:boundaryEvent>
    <bpmn:task id="undo" isForCompensation="true" />
    <bpmn:association id="as" associationDirection="One" sourceRef="b" targetRef="undo" />
    <bpmn:sequenceFlow id="f2" sourceRef="A" targetRef="throw" />
    <bpmn:intermediateThrowEvent id="throw"><bpmn:compensateEventDefinition activityRef="A" /></bpmn:intermediateThrowEvent>
    <bpmn:sequenceFlow id="f3" sourceRef="throw" targetRef="end" />
    <bpmn:endEvent id="end"><bpmn:compensateEventDefinition waitForCompletion="true" /></bpmn:endEvent>"#,
    );
    let process = crate::parse_definitions(ok.as_bytes()).expect("valid").remove(0);
    let (a, undo) = (process.element("A").unwrap(), process.element("undo").unwrap());
    assert_eq!(process.compensation_of(a), Some((process.element("b").unwrap(), undo)));
    assert!(process.is_compensation_handler(undo) && process.has_compensation());
    assert!(
        matches!(process.elements[process.element("throw").unwrap()].kind, ElementKind::CompensationThrowEvent { activity: Some(x), end: false } if x == a)
    );
    assert_eq!(process.elements[process.element("end").unwrap()].kind.bpmn_element_type(), "END_EVENT");

    let cases = [
        (
            r#"<bpmn:boundaryEvent id="b" attachedToRef="A"><bpmn:compensateEventDefinition /></bpmn:boundaryEvent>"#,
            "b",
            "Compensation boundary events must have a compensation association and no outgoing sequence flows",
        ),
        (
            r#"<bpmn:intermediateThrowEvent id="t"><bpmn:compensateEventDefinition waitForCompletion="false" /></bpmn:intermediateThrowEvent>"#,
            "t",
            "A compensation intermediate throwing event waitForCompletion attribute must be true or not present",
        ),
        (
            r#"<bpmn:endEvent id="t"><bpmn:compensateEventDefinition waitForCompletion="false" /></bpmn:endEvent>"#,
            "t",
            "A compensation end event waitForCompletion attribute must be true or not present",
        ),
        (
            r#"<bpmn:task id="h" isForCompensation="true" /><bpmn:sequenceFlow id="x" sourceRef="h" targetRef="A" />"#,
            "h",
            "A compensation handler should have no outgoing sequence flows",
        ),
        (
            r#"<bpmn:task id="h" isForCompensation="true" /><bpmn:sequenceFlow id="x" sourceRef="A" targetRef="h" />"#,
            "h",
            "A compensation handler should have no incoming sequence flows",
        ),
        (
            r#"<bpmn:task id="h" isForCompensation="true" /><bpmn:boundaryEvent id="hb" attachedToRef="h"><bpmn:timerEventDefinition><bpmn:timeDuration>PT1H</bpmn:timeDuration></bpmn:timerEventDefinition></bpmn:boundaryEvent>"#,
            "h",
            "A compensation handler should have no boundary events",
        ),
        (
            r#"<bpmn:intermediateThrowEvent id="t"><bpmn:compensateEventDefinition activityRef="nope" /></bpmn:intermediateThrowEvent>"#,
            "t",
            "The referenced compensation activity 'nope' doesn't exist",
        ),
        (
            r#"<bpmn:intermediateThrowEvent id="t"><bpmn:compensateEventDefinition activityRef="A" /></bpmn:intermediateThrowEvent>"#,
            "t",
            "The referenced compensation activity 'A' must have either a compensation boundary event or be a subprocess",
        ),
        (
            r#"<bpmn:subProcess id="s"><bpmn:startEvent id="s1" /><bpmn:sequenceFlow id="sf" sourceRef="s1" targetRef="t" /><bpmn:endEvent id="t"><bpmn:compensateEventDefinition activityRef="A" /></bpmn:endEvent></bpmn:subProcess>"#,
            "t",
            "The referenced compensation activity 'A' must be in the same scope as the compensation throw event",
        ),
    ];
    for (extra, id, message) in cases {
        let xml = model(&format!(
            r#"    <bpmn:startEvent id="start" />
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="A" />
    <bpmn:task id="A" />
    {extra}"#
        ));
        let errs = errors(&xml);
        assert!(errs.iter().any(|e| e.element_id == id && e.message == message), "{message}: {errs:?}");
    }
}

fn user_task(extensions: &str) -> String {
    model(&format!(
        r#"<bpmn:startEvent id="start" />
    <bpmn:userTask id="ut"><bpmn:extensionElements><zeebe:userTask/>{extensions}</bpmn:extensionElements></bpmn:userTask>
    <bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="ut" />"#
    ))
}

#[test]
fn zeebe_user_tasks_keep_their_properties() {
    let xml = user_task(
        r#"<zeebe:assignmentDefinition assignee="=owner" candidateGroups="a, b" candidateUsers="=users"/>
        <zeebe:taskSchedule dueDate="2023-03-02T15:35+02:00" followUpDate="=later"/>
        <zeebe:formDefinition formId="f"/>
        <zeebe:taskHeaders><zeebe:header key="k" value="v"/></zeebe:taskHeaders>"#,
    );
    let processes = parse_definitions(xml.as_bytes()).unwrap();
    let e = &processes[0].elements[processes[0].element("ut").unwrap()];
    assert_eq!(e.kind.bpmn_element_type(), "USER_TASK");
    let ElementKind::ZeebeUserTask(props) = &e.kind else { panic!("a Zeebe user task: {:?}", e.kind) };
    assert!(matches!(props.assignee, Some(ExprOrStatic::Expression(_))));
    assert!(matches!(&props.candidate_groups, Some(ExprOrStatic::Static(list)) if list == r#"["a","b"]"#));
    assert!(matches!(props.candidate_users, Some(ExprOrStatic::Expression(_))));
    assert!(matches!(&props.due_date, Some(ExprOrStatic::Static(d)) if d == "2023-03-02T15:35+02:00"));
    assert!(matches!(&props.form_id, Some(ExprOrStatic::Static(f)) if f == "f"));
    assert_eq!(props.headers, vec![("k".to_string(), "v".to_string())]);
    // without zeebe:userTask, a user task is still job-based
    let job_based =
        model(r#"<bpmn:startEvent id="start" /><bpmn:userTask id="ut"/><bpmn:sequenceFlow id="f1" sourceRef="start" targetRef="ut" />"#);
    let processes = parse_definitions(job_based.as_bytes()).unwrap();
    assert!(matches!(processes[0].elements[1].kind, ElementKind::JobElement { element_type: "USER_TASK", .. }));
}

#[test]
fn zeebe_user_tasks_are_checked_with_zeebes_messages() {
    let messages = |ext: &str| errors(&user_task(ext)).into_iter().map(|e| e.message).collect::<Vec<_>>();
    let form = "Exactly one of the attributes 'formId, externalReference' must be present and not blank for native user tasks";
    assert_eq!(messages(r#"<zeebe:formDefinition formKey="x"/>"#), vec![form]);
    assert_eq!(messages(r#"<zeebe:formDefinition formId="a" externalReference="b"/>"#), vec![form]);
    assert_eq!(
        messages(r#"<zeebe:taskSchedule dueDate="12345"/>"#),
        vec!["Expected static value to be a valid DateTime String, e.g. '2023-03-02T15:35+02:00', but found '12345'."]
    );
    assert_eq!(
        messages(r#"<zeebe:assignmentDefinition candidateUsers="1,,"/>"#),
        vec!["Expected static value to be a list of comma-separated values, e.g. 'a,b,c', but found '1,,'"]
    );
    // a local date-time has no zone: not a ZonedDateTime
    assert_eq!(messages(r#"<zeebe:taskSchedule followUpDate="2023-03-02T15:35:00"/>"#).len(), 1);
}
