import TimerdCore

/// libFuzzer harness for `CalendarSpec` (systemd's OnCalendar= syntax): the input is the spec text.
///
/// Asserts for every spec that parses: its normalised form parses again to the same normalised form
/// (systemd's own test-calendarspec checks this), and `next` returns strictly later times, from a base
/// in 2026, in UTC and in Australia/Lord_Howe (30-minute DST, loaded from /usr/share/zoneinfo once).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCalendar(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: fuzzInput(data, size), as: UTF8.self)
    guard let spec = try? CalendarSpec.parse(text) else { return 0 }
    let normalized = spec.normalized
    do {
        let again = try CalendarSpec.parse(normalized)
        require(again.normalized == normalized,
                "\(text.debugDescription) normalises to \(normalized.debugDescription), which normalises to \(again.normalized.debugDescription)")
    } catch {
        require(false, "\(text.debugDescription) normalises to \(normalized.debugDescription), which does not parse: \(error.message)")
    }
    for zone in [ZoneRules.utc, FuzzZones.lordHowe.rules] {
        var after = fuzzBaseSeconds * 1_000_000
        for _ in 0..<4 {
            guard let next = spec.next(after: after, in: zone) else { break }
            require(next > after, "\(text.debugDescription) in \(zone.name): next(after: \(after)) = \(next) is not later")
            after = next
        }
    }
    return 0
}
