//! BPMN XML: any bytes parsed and validated as a deployment's resource is (with the default
//! limits: element depth, expression nesting). Property: no panic, bounded time and memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(processes) = waggle_bpmn::parse_definitions(data) {
        // what a deployment reads of a valid process
        for p in &processes {
            let _ = format!("{:?}", p.id);
        }
    }
});
