//! How much output a call can be given within what a bucket has left.

use crate::Unit;
use crate::prices::Price;

/// The most output tokens that, with `input` estimated input tokens, fit in the `left` a bucket
/// of `unit` still has: tokens count one for one, micro-dollars at the model's input and output
/// prices (exactly as [`Price::cost`] rounds, so the reservation of input + the result never
/// passes `left`). `None` when not even the input fits. Buckets that do not count spend
/// (messages) leave any amount.
pub(crate) fn output_room(unit: Unit, left: u64, input: u64, price: &Price) -> Option<u64> {
    match unit {
        Unit::Tokens => left.checked_sub(input),
        Unit::Microdollars => {
            // cost = ceil((input × in + output × out) / 1e6) ≤ left  ⇔  the sum ≤ left × 1e6.
            let budget = u128::from(left) * 1_000_000;
            let rest = budget.checked_sub(u128::from(input) * u128::from(price.input))?;
            Some(match price.output {
                0 => u64::MAX,
                out => u64::try_from(rest / u128::from(out)).unwrap_or(u64::MAX),
            })
        }
        Unit::Messages => Some(u64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transcript::Usage;

    const PRICE: Price = Price {
        input: 3_000_000,
        output: 15_000_000,
        cache_read: 300_000,
        cache_write: 3_750_000,
    };

    #[test]
    fn tokens_left_after_the_input_are_the_room() {
        assert_eq!(output_room(Unit::Tokens, 5_000, 900, &PRICE), Some(4_100));
        assert_eq!(output_room(Unit::Tokens, 900, 900, &PRICE), Some(0));
        assert_eq!(output_room(Unit::Tokens, 899, 900, &PRICE), None);
    }

    #[test]
    fn the_dollar_room_is_the_largest_output_whose_cost_still_fits() {
        for (left, input) in [(10_000, 1_000), (7, 0), (123_457, 20_000), (3, 1)] {
            let room = output_room(Unit::Microdollars, left, input, &PRICE).unwrap();
            let cost = |output| {
                PRICE.cost(&Usage {
                    input_tokens: input,
                    output_tokens: output,
                    ..Usage::default()
                })
            };
            assert!(cost(room) <= left, "{left} {input}: {room} fits");
            assert!(cost(room + 1) > left, "{left} {input}: one more does not");
        }
        assert_eq!(output_room(Unit::Microdollars, 2, 1_000, &PRICE), None);
        let free = Price { output: 0, ..PRICE };
        assert_eq!(output_room(Unit::Microdollars, 3, 1, &free), Some(u64::MAX));
    }
}
