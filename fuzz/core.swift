import TimerdCore

/// libFuzzer harness for the rest of TimerdCore's parsers. The first byte picks the parser (its value
/// modulo 4), the remaining bytes are its input:
/// - 0: cron: `CronExpression.next` returns strictly later times that `matches` accepts, and the daemon's
///   `CivilSchedule` (DST rules applied) returns strictly later instants, in UTC and Australia/Lord_Howe;
/// - 1: RFC 3339: a parsed time formats (UTC, microseconds) to text that parses back to it, cut to
///   whole microseconds;
/// - 2: POSIX TZ rules (`CET-1CEST,M3.5.0,M10.5.0/3`) and 3: TZif files: a zone that loads answers
///   offset and local-time questions and runs a daily cron job across its transitions.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCore(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = fuzzInput(data, size)
    guard let selector = bytes.first else { return 0 }
    let text = String(decoding: bytes.dropFirst(), as: UTF8.self)
    switch selector % 4 {
    case 0:
        guard let cron = try? CronExpression.parse(text) else { return 0 }
        var local = fuzzBaseSeconds
        for _ in 0..<3 {
            guard let next = cron.next(after: local) else { break }
            require(next > local, "cron \(text.debugDescription): next(after: \(local)) = \(next) is not later")
            require(cron.matches(localSeconds: next), "cron \(text.debugDescription): next = \(next) does not match")
            local = next
        }
        for zone in [ZoneRules.utc, FuzzZones.lordHowe.rules] {
            checkCivil(CivilSchedule(pattern: .cron(cron), zone: zone), text)
        }
    case 1:
        guard let time = try? RFC3339.parse(text) else { return 0 }
        let formatted = RFC3339.format(time)
        let again = try? RFC3339.parse(formatted)
        require(again == RFC3339.truncatedToMicroseconds(time),
                "RFC 3339 \(text.debugDescription) formats as \(formatted), which parses to \(String(describing: again))")
    case 2:
        guard let zone = try? ZoneRules(posix: text) else { return 0 }
        exercise(zone, text)
    default:
        guard let zone = try? ZoneRules(tzif: Array(bytes.dropFirst()), name: "fuzz") else { return 0 }
        exercise(zone, "TZif")
    }
    return 0
}

private let dailyAtHalfPastTwo = try! CronExpression.parse("30 2 * * *")

private func exercise(_ zone: ZoneRules, _ what: String) {
    for seconds in [fuzzBaseSeconds, fuzzBaseSeconds + 180 * 86_400, 0, -2_208_988_800, 4_102_444_800] {
        _ = zone.utcOffset(at: seconds)
        _ = zone.localTime(seconds)
        _ = zone.instants(ofLocal: seconds)
    }
    for gap in DSTGap.allCases {
        checkCivil(CivilSchedule(pattern: .cron(dailyAtHalfPastTwo), zone: zone, gap: gap), what)
    }
}

/// A few fire times from 2026 on: each strictly later than the one before.
private func checkCivil(_ schedule: CivilSchedule, _ what: String) {
    var cursor = WallTime(seconds: fuzzBaseSeconds)
    for _ in 0..<4 {
        guard let next = schedule.next(after: cursor) else { break }
        require(next > cursor, "\(what) in \(schedule.zone.name): next(after: \(cursor)) = \(next) is not later")
        cursor = next
    }
}
