/// libFuzzer entry point for the pure parsers of TimerdCore: the first byte picks the parser (cron, calendar,
/// duration and RFC 3339, POSIX TZ and TZif), the rest is its input. Parsed schedules also compute a few
/// fire times. Built by `make fuzz` together with the TimerdCore sources (see the Makefile).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes.dropFirst(), as: UTF8.self)
    switch bytes[0] % 4 {
    case 0:
        if let cron = try? CronExpression.parse(text) {
            var t: Int64 = 1_767_225_600
            for _ in 0..<3 { guard let n = cron.next(after: t) else { break }; t = n }
        }
    case 1:
        if let spec = try? CalendarSpec.parse(text) {
            _ = spec.normalized
            var t: Int64 = 1_767_225_600_000_000
            for _ in 0..<3 { guard let n = spec.next(after: t, in: ZoneRules.utc) else { break }; t = n }
        }
    case 2:
        _ = try? DurationText.parse(text)
        _ = try? RFC3339.parse(text)
    default:
        _ = try? ZoneRules(posix: text)
        _ = try? ZoneRules(tzif: Array(bytes.dropFirst()), name: "fuzz")
    }
    return 0
}
