//! Whole numbers written with a fraction. JSON Schema counts `250.0` and `1e2` as integers, so
//! they pass a tool's `"type": "integer"`; a handler reading them with `as_u64` finds none and
//! takes its default instead (an event made with one place, a capacity change that silently does
//! nothing), and a risk policy reading them the same way judges a different call than the one
//! that runs. Every call's arguments are made whole where they are whole before anything reads
//! them: validation, the confirmation gate's hash and policy, the handler.

use serde_json::{Number, Value};

/// The largest integer an `f64` holds exactly (2⁵³): past it, a whole-looking float is left as
/// it is.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// `value` with every number that is whole but written with a fraction or an exponent (`250.0`,
/// `1e2`) as the integer it is; other numbers, and everything else, as they were.
pub fn whole_numbers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() <= EXACT
            {
                *n = match f < 0.0 {
                    true => Number::from(f as i64),
                    false => Number::from(f as u64),
                };
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn whole_floats_become_integers_and_nothing_else_changes() {
        let mut args = json!({
            "capacity": 250.0,
            "big": 1e2,
            "below": -3.0,
            "price": 2.5,
            "huge": 1e300,
            "list": [1.0, "1.0", true],
            "nested": {"n": 7.0}
        });
        whole_numbers(&mut args);
        assert_eq!(
            args,
            json!({
                "capacity": 250,
                "big": 100,
                "below": -3,
                "price": 2.5,
                "huge": 1e300,
                "list": [1, "1.0", true],
                "nested": {"n": 7}
            })
        );
        assert_eq!(args["capacity"].as_u64(), Some(250));
    }
}
