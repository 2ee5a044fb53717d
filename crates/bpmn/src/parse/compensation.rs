//! Compensation in a model: handlers (`isForCompensation="true"`), the association from a
//! compensation boundary event to its handler, and a throw event's `activityRef`; checked with
//! Zeebe 8.5's messages (its engine test `bpmn/compensation/CompensationEventTest.java`, its
//! model's `CompensationEventDefinitionValidator` for `activityRef`, and
//! https://docs.camunda.io/docs/components/modeler/bpmn/compensation-handler/).

use std::collections::HashMap;

use roxmltree::Node;

use super::{is_bpmn, ProcessParser};
use crate::model::{Element, ElementKind};

/// Links compensation boundary events to their handlers and throw events to the activity they
/// name; reports what Zeebe refuses.
pub(super) fn link(parser: &mut ProcessParser, process: Node, nodes: &[Node], elements: &mut [Element], index: &HashMap<String, usize>) {
    let handlers: Vec<bool> = nodes.iter().map(|n| n.attribute("isForCompensation") == Some("true")).collect();
    for (i, e) in elements.iter().enumerate().filter(|&(i, _)| handlers[i]) {
        if !e.incoming.is_empty() {
            parser.fail(nodes[i], "A compensation handler should have no incoming sequence flows");
        }
        if !e.outgoing.is_empty() {
            parser.fail(nodes[i], "A compensation handler should have no outgoing sequence flows");
        }
        if !e.boundary_events.is_empty() {
            parser.fail(nodes[i], "A compensation handler should have no boundary events");
        }
    }
    let associations: Vec<(&str, &str)> = process
        .descendants()
        .filter(|n| is_bpmn(*n, "association"))
        .filter_map(|n| Some((n.attribute("sourceRef")?, n.attribute("targetRef")?)))
        .collect();
    for i in 0..elements.len() {
        match elements[i].kind {
            ElementKind::CompensationBoundaryEvent { attached_to, .. } => {
                let id = elements[i].id.as_str();
                let handler = associations
                    .iter()
                    .filter(|(source, _)| *source == id)
                    .find_map(|(_, target)| index.get(*target).copied().filter(|&h| handlers[h]));
                match handler {
                    Some(handler) if elements[i].outgoing.is_empty() => {
                        elements[i].kind = ElementKind::CompensationBoundaryEvent { attached_to, handler };
                    }
                    _ => parser
                        .fail(nodes[i], "Compensation boundary events must have a compensation association and no outgoing sequence flows"),
                }
            }
            ElementKind::CompensationThrowEvent { end, .. } => {
                let definition = nodes[i].children().find(|n| is_bpmn(*n, "compensateEventDefinition"));
                let Some(reference) = definition.and_then(|d| d.attribute("activityRef")).filter(|r| !r.is_empty()) else { continue };
                let Some(&activity) = index.get(reference) else {
                    parser.fail(nodes[i], format!("The referenced compensation activity '{reference}' doesn't exist"));
                    continue;
                };
                let target = &elements[activity];
                let compensable = matches!(target.kind, ElementKind::SubProcess { .. })
                    || target.boundary_events.iter().any(|&b| matches!(elements[b].kind, ElementKind::CompensationBoundaryEvent { .. }));
                if !compensable {
                    parser.fail(
                        nodes[i],
                        format!("The referenced compensation activity '{reference}' must have either a compensation boundary event or be a subprocess"),
                    );
                }
                // the throw event's scope, or the one around its event subprocess
                let scope = elements[i].scope;
                let outer = scope.filter(|&s| matches!(elements[s].kind, ElementKind::EventSubProcess { .. })).map(|s| elements[s].scope);
                let same_scope = target.scope == scope || outer == Some(target.scope);
                if !same_scope {
                    parser.fail(
                        nodes[i],
                        format!(
                            "The referenced compensation activity '{reference}' must be in the same scope as the compensation throw event"
                        ),
                    );
                }
                if compensable && same_scope {
                    elements[i].kind = ElementKind::CompensationThrowEvent { activity: Some(activity), end };
                }
            }
            _ => {}
        }
    }
}
