import TimerdCore
import TimerdProtocol
import TimerdSystem

/// The lines `watch` prints for the events of a `WATCH` stream. Pure but for the time zone, which the
/// caller passes in as `timeOfDay`.
///
/// `18:30:56.401 hello fired`, `18:30:56.403 hello #3 started`,
/// `18:30:56.403 hello #3 finished ok (exited with status 0)`,
/// `18:31:00.000 x skipped: run 1 is still going (overlap=skip)`, `… x cancelled`, `… x cancelled: REASON`,
/// `… x added`, `… x paused`, `… x resumed`, `… watch dropped: REASON`. A line that is not an
/// event is printed as it came.
package enum WatchText {
    /// One event as the daemon sends it; fields absent when not applicable.
    struct Event: Decodable {
        var at: String
        var event: String
        var job: String?
        var run: Int?
        var result: String?
        var reason: String?
    }

    /// `timeOfDay` turns seconds since the epoch into local `HH:MM:SS`.
    package static func line(_ json: String, timeOfDay: (Int64) -> String = SystemClock.localTimeOfDay) -> String {
        guard let event = try? Payload.decode(Event.self, from: json) else { return json + "\n" }
        var words = [time(event.at, timeOfDay: timeOfDay)]
        if event.event == "dropped" {
            words.append("watch")
        } else if let job = event.job {
            words.append(job)
        }
        if let run = event.run { words.append("#\(run)") }
        words.append(event.event)
        var text = words.joined(separator: " ")
        switch event.event {
        case "finished":
            if let result = event.result { text += " " + result }
            if let reason = event.reason { text += " (\(reason))" }
        default:
            guard let reason = event.reason else { break }
            // A reason that starts with the event's own word takes its place, so the word is said once:
            // `x cancelled`, `x cancelled: its owner process 4242 exited`, not `x cancelled: cancelled…`.
            let rest = reason.dropFirst(event.event.count)
            if reason.hasPrefix(event.event), rest.isEmpty || [":", ";", " "].contains(rest.first!) {
                text += rest
            } else {
                text += ": " + reason
            }
        }
        return text + "\n"
    }

    /// The final note on stderr when timerd ends the stream: the dropped reason if the last event was
    /// `dropped`.
    package static func closedNote(lastLine: String?) -> String {
        if let lastLine, let event = try? Payload.decode(Event.self, from: lastLine), event.event == "dropped" {
            return "timerctl: timerd dropped the watch" + (event.reason.map { ": " + $0 } ?? "") + "\n"
        }
        return "timerctl: timerd closed the watch\n"
    }

    /// `HH:MM:SS.mmm` in local time for an RFC 3339 time; the text itself when it does not parse.
    static func time(_ text: String, timeOfDay: (Int64) -> String) -> String {
        guard let time = try? RFC3339.parse(text) else { return text }
        let nanoseconds = time.nanosecondsSinceEpoch
        var seconds = nanoseconds / 1_000_000_000
        var rest = nanoseconds % 1_000_000_000
        if rest < 0 {
            seconds -= 1
            rest += 1_000_000_000
        }
        let milliseconds = String(rest / 1_000_000)
        return timeOfDay(seconds) + "." + String(repeating: "0", count: 3 - milliseconds.count) + milliseconds
    }
}
