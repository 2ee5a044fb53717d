//! Zeebe user tasks (`zeebe:userTask` in a user task's extension elements): assignment, task
//! schedule, linked form or external reference, and task headers, checked with Zeebe 8.5's
//! messages (its model's `ZeebeUserTaskValidator`s: `ZeebeFormDefinition` "for native user
//! tasks", `ZeebeTaskSchedule` static date-times, `ZeebeAssignmentDefinition` static lists;
//! https://docs.camunda.io/docs/components/modeler/bpmn/user-tasks/).

use roxmltree::Node;

use super::{is_zeebe, ProcessParser};
use crate::model::{ElementKind, ExprOrStatic, UserTaskProperties};

impl ProcessParser<'_, '_, '_> {
    /// A Zeebe user task: its properties, static or FEEL, evaluated when it activates.
    pub(super) fn zeebe_user_task(&mut self, node: Node) -> Option<ElementKind> {
        let mut props = UserTaskProperties::default();
        let before = self.errors.len();
        for assignment in self.extensions(node).filter(|n| is_zeebe(*n, "assignmentDefinition")) {
            if let Some(value) = non_blank(assignment.attribute("assignee")) {
                props.assignee = Some(self.expr_or_static(node, value));
            }
            for (attribute, slot) in [("candidateGroups", &mut props.candidate_groups), ("candidateUsers", &mut props.candidate_users)] {
                let Some(value) = non_blank(assignment.attribute(attribute)) else { continue };
                *slot = Some(match self.expr_or_static(node, value) {
                    ExprOrStatic::Static(list) => match csv_list(&list) {
                        Some(items) => ExprOrStatic::Static(serde_json::Value::from(items).to_string()),
                        None => {
                            self.fail(
                                node,
                                format!("Expected static value to be a list of comma-separated values, e.g. 'a,b,c', but found '{list}'"),
                            );
                            continue;
                        }
                    },
                    expression => expression,
                });
            }
        }
        for schedule in self.extensions(node).filter(|n| is_zeebe(*n, "taskSchedule")) {
            for (attribute, slot) in [("dueDate", &mut props.due_date), ("followUpDate", &mut props.follow_up_date)] {
                let Some(value) = non_blank(schedule.attribute(attribute)) else { continue };
                let value = self.expr_or_static(node, value);
                if let ExprOrStatic::Static(text) = &value {
                    if !is_zoned_date_time(text) {
                        self.fail(
                            node,
                            format!(
                                "Expected static value to be a valid DateTime String, e.g. '2023-03-02T15:35+02:00', but found '{text}'."
                            ),
                        );
                        continue;
                    }
                }
                *slot = Some(value);
            }
        }
        for form in self.extensions(node).filter(|n| is_zeebe(*n, "formDefinition")) {
            let form_id = non_blank(form.attribute("formId"));
            let reference = non_blank(form.attribute("externalReference"));
            match (form_id, reference) {
                (Some(id), None) => props.form_id = Some(self.expr_or_static(node, id)),
                (None, Some(r)) => props.external_reference = Some(self.expr_or_static(node, r)),
                _ => self.fail(
                    node,
                    "Exactly one of the attributes 'formId, externalReference' must be present and not blank for native user tasks",
                ),
            }
        }
        for list in self.extensions(node).filter(|n| is_zeebe(*n, "taskHeaders")) {
            for header in list.children().filter(|n| is_zeebe(*n, "header")) {
                let key = header.attribute("key").unwrap_or_default();
                if !key.is_empty() {
                    props.headers.push((key.to_string(), header.attribute("value").unwrap_or_default().to_string()));
                }
            }
        }
        (self.errors.len() == before).then(|| ElementKind::ZeebeUserTask(Box::new(props)))
    }
}

fn non_blank(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// A static list "a, b,c": its trimmed items; None when an item is empty (Zeebe's `isListOfCsv`).
fn csv_list(text: &str) -> Option<Vec<String>> {
    let items: Vec<String> = text.split(',').map(|s| s.trim().to_string()).collect();
    items.iter().all(|s| !s.is_empty()).then_some(items)
}

/// Whether `text` is a date-time with an offset or zone (Java's `ZonedDateTime`), as a static
/// due or follow-up date must be.
fn is_zoned_date_time(text: &str) -> bool {
    zoned_date_time(text).is_some()
}

/// `text` as a date-time with an offset or zone (Java's `ZonedDateTime.parse`: seconds
/// optional), printed as Java prints it (`2023-03-02T15:35+02:00`: seconds only when not
/// zero, a fraction in groups of three digits); None when it is not one.
pub fn zoned_date_time(text: &str) -> Option<String> {
    let text = text.trim();
    let parsed = waggle_feel::DateTime::parse(text).or_else(|| {
        // HH:MM without seconds
        let (date, rest) = text.split_once('T')?;
        let cut = rest.find(|c: char| !(c.is_ascii_digit() || c == ':')).unwrap_or(rest.len());
        (cut == 5).then(|| waggle_feel::DateTime::parse(&format!("{date}T{}:00{}", &rest[..5], &rest[5..])))?
    })?;
    let shown = parsed.to_string();
    // a local date-time (no offset, no zone) is not a ZonedDateTime
    let zoned = shown.split_once('T').is_some_and(|(_, time)| time.contains(['Z', '+', '-', '[']));
    zoned.then(|| java_form(&shown))
}

fn java_form(shown: &str) -> String {
    let Some((date, rest)) = shown.split_once('T') else { return shown.to_string() };
    let end = rest.find(['Z', '+', '-', '[']).unwrap_or(rest.len());
    let (time, zone) = rest.split_at(end);
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut out = format!("{date}T{}", &hms[..hms.len().min(5)]);
    let seconds = hms.get(6..8).unwrap_or("00");
    if seconds != "00" || !fraction.is_empty() {
        out.push(':');
        out.push_str(seconds);
    }
    if !fraction.is_empty() {
        let digits = fraction.len().div_ceil(3) * 3;
        out.push('.');
        out.push_str(&format!("{fraction:0<digits$}"));
    }
    out.push_str(zone);
    out
}

#[cfg(test)]
mod tests {
    use super::zoned_date_time;

    #[test]
    fn dates_print_as_java_prints_a_zoned_date_time() {
        assert_eq!(zoned_date_time("2023-03-02T15:35:00+02:00").as_deref(), Some("2023-03-02T15:35+02:00"));
        assert_eq!(zoned_date_time("2023-03-02T15:35+02:00").as_deref(), Some("2023-03-02T15:35+02:00"));
        assert_eq!(zoned_date_time("2023-03-02T15:35:07Z").as_deref(), Some("2023-03-02T15:35:07Z"));
        assert_eq!(zoned_date_time("2023-03-02T15:35:00.5Z").as_deref(), Some("2023-03-02T15:35:00.500Z"));
        assert_eq!(zoned_date_time("2023-03-02T15:35:00@Europe/Berlin").as_deref(), Some("2023-03-02T15:35+01:00[Europe/Berlin]"));
        assert_eq!(zoned_date_time("2023-03-02T15:35:00"), None);
        assert_eq!(zoned_date_time("tomorrow"), None);
    }
}
