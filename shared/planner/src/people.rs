//! Attendee services: register (by the owner or through the public form), withdraw, list.
//! Each registration or withdrawal changes the attendee and the event's count in one commit.

use crate::service::{Access, Caller, change, new_id};
use crate::{ATTENDEE, Attendee, EVENT, Event, EventStatus, Planner, PlannerError};
use transcript::UserId;

impl Planner {
    /// The owner adds someone to their event (draft or published).
    pub async fn register_attendee(
        &self,
        caller: &Caller,
        event_id: &str,
        name: &str,
        email: &str,
    ) -> Result<Attendee, PlannerError> {
        let (event, before) = self.owned::<Event>(&caller.user, EVENT, event_id).await?;
        self.add(
            Access::Owner(caller),
            &caller.user,
            event,
            before,
            name,
            email,
        )
        .await
    }

    /// The public registration form: anyone may register for a published event. Audited under
    /// the event's owner as actor `public`; not on the owner's undo stack.
    pub async fn register_public(
        &self,
        action_id: &str,
        event_id: &str,
        name: &str,
        email: &str,
    ) -> Result<Attendee, PlannerError> {
        let not_found = || PlannerError::NotFound {
            kind: EVENT,
            id: event_id.to_owned(),
        };
        let record = self
            .store
            .record(EVENT, event_id)
            .await?
            .ok_or_else(not_found)?;
        let event: Event = serde_json::from_value(record.value.clone()).map_err(|_| not_found())?;
        // Drafts are not public: they read as absent.
        if event.status != EventStatus::Published {
            return Err(not_found());
        }
        let owner = record.owner;
        let access = Access::Public {
            owner: &owner,
            action_id,
        };
        self.add(access, &owner, event, record.value, name, email)
            .await
    }

    async fn add(
        &self,
        access: Access<'_>,
        owner: &UserId,
        mut event: Event,
        before: serde_json::Value,
        name: &str,
        email: &str,
    ) -> Result<Attendee, PlannerError> {
        if event.status == EventStatus::Cancelled {
            return Err(PlannerError::Rule(format!("{} is cancelled.", event.title)));
        }
        if event.registered >= event.capacity {
            return Err(PlannerError::Rule(format!("{} is full.", event.title)));
        }
        if name.trim().is_empty() || !email.contains('@') {
            return Err(PlannerError::Rule(
                "A registration needs a name and an email address.".into(),
            ));
        }
        // An address holds no space or invisible character (a question drops those: a twin of
        // "dana@example.com" with a zero-width space would read exactly like her), and neither
        // it nor the name a direction mark (from the public form too, which the tools' check
        // does not see).
        if email
            .trim()
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || transcript::is_invisible_format(c))
        {
            return Err(PlannerError::Rule(
                "An email address has no spaces or invisible characters in it.".into(),
            ));
        }
        if crate::direction::is_marked(name) {
            return Err(PlannerError::Rule(
                "The name holds an invisible direction mark (like U+202E); write it without one."
                    .into(),
            ));
        }
        // The owner's (or their assistant's) registrations: one place per email address, so
        // a model cannot fill a published event with copies (a capacity cut, unasked) or make
        // a twin of someone to have the real one withdrawn. The public's registration is not
        // told whether an address is registered already (nobody may read the list that way).
        if let Access::Owner(_) = access {
            let email_key = crate::events::shown_key(email.trim());
            let taken = self
                .store
                .records_of(owner, ATTENDEE)
                .await?
                .into_iter()
                .filter_map(|r| serde_json::from_value::<Attendee>(r.value).ok())
                .any(|a| {
                    a.event_id == event.id && crate::events::shown_key(a.email.trim()) == email_key
                });
            if taken {
                return Err(PlannerError::Rule(format!(
                    "{} is registered for {} already; each address has one place.",
                    email.trim(),
                    event.title
                )));
            }
        }
        let attendee = Attendee {
            id: new_id("at"),
            event_id: event.id.clone(),
            name: name.trim().to_owned(),
            email: email.trim().to_owned(),
        };
        event.registered += 1;
        let changes = vec![
            change(EVENT, &event.id, owner, Some(before), Some(&event)),
            change(ATTENDEE, &attendee.id, owner, None, Some(&attendee)),
        ];
        self.write(access, changes, &attendee).await?;
        Ok(attendee)
    }

    /// Remove an attendee from the caller's event.
    pub async fn withdraw_attendee(
        &self,
        caller: &Caller,
        attendee_id: &str,
    ) -> Result<Attendee, PlannerError> {
        let (attendee, attendee_before) = self
            .owned::<Attendee>(&caller.user, ATTENDEE, attendee_id)
            .await?;
        let (mut event, event_before) = self
            .owned::<Event>(&caller.user, EVENT, &attendee.event_id)
            .await?;
        event.registered = event.registered.saturating_sub(1);
        let changes = vec![
            change(
                EVENT,
                &event.id,
                &caller.user,
                Some(event_before),
                Some(&event),
            ),
            change::<Attendee>(
                ATTENDEE,
                attendee_id,
                &caller.user,
                Some(attendee_before),
                None,
            ),
        ];
        self.write(Access::Owner(caller), changes, &attendee)
            .await?;
        Ok(attendee)
    }

    /// The attendees of one of the caller's events, by name.
    pub async fn list_attendees(
        &self,
        caller: &Caller,
        event_id: &str,
    ) -> Result<Vec<Attendee>, PlannerError> {
        let (event, _) = self.owned::<Event>(&caller.user, EVENT, event_id).await?;
        let mut people: Vec<Attendee> = self
            .store
            .records_of(&caller.user, ATTENDEE)
            .await?
            .into_iter()
            .filter_map(|r| serde_json::from_value::<Attendee>(r.value).ok())
            .filter(|a| a.event_id == event.id)
            .collect();
        people.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
        Ok(people)
    }
}
