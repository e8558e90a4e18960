import TimerdCore

/// Times and spans the way `list` and `show` print them.
package enum TimeText {
    /// `in 4s`, `in 2m10s`, `3s ago`, `now`: `time` relative to `now`, rounded to the second, at most two
    /// units (`1d2h`, `1h5m`, `2m10s`).
    package static func relative(_ time: WallTime, now: WallTime) -> String {
        let nanoseconds = time.nanosecondsSinceEpoch - now.nanosecondsSinceEpoch
        let seconds = (nanoseconds.magnitude + 500_000_000) / 1_000_000_000
        if seconds == 0 { return "now" }
        let span = coarseSpan(seconds: seconds)
        return nanoseconds > 0 ? "in " + span : span + " ago"
    }

    /// Relative form of an RFC 3339 string; the string itself when it does not parse, `-` for nil.
    package static func relative(_ text: String?, now: WallTime) -> String {
        guard let text else { return "-" }
        guard let time = try? RFC3339.parse(text) else { return text }
        return relative(time, now: now)
    }

    /// `2m10s`: the largest nonzero unit and, if nonzero, the next one down.
    package static func coarseSpan(seconds: UInt64) -> String {
        let units: [(String, UInt64)] = [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)]
        guard let first = units.firstIndex(where: { seconds >= $0.1 }) else { return "0s" }
        let (name, size) = units[first]
        var text = "\(seconds / size)\(name)"
        if first + 1 < units.count {
            let (nextName, nextSize) = units[first + 1]
            let rest = seconds % size / nextSize
            if rest > 0 { text += "\(rest)\(nextName)" }
        }
        return text
    }

    /// A span given in milliseconds: `0ms`, `<1ms`, `250ms`, `1.5s`, `59.999s`, `2m5s`.
    package static func milliseconds(_ ms: Double) -> String {
        guard ms.isFinite else { return "\(ms)ms" }
        if ms < 0 { return "-" + milliseconds(-ms) }
        if ms == 0 { return "0ms" }
        let rounded = Int64(ms.rounded())
        if rounded == 0 { return "<1ms" }
        if rounded < 1_000 { return "\(rounded)ms" }
        if rounded < 60_000 {
            var fraction = String(rounded % 1_000)
            fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
            while fraction.last == "0" { fraction.removeLast() }
            return "\(rounded / 1_000)" + (fraction.isEmpty ? "" : "." + fraction) + "s"
        }
        return DurationText.format(.seconds((rounded + 500) / 1_000))
    }
}
