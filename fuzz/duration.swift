import TimerdCore

/// libFuzzer harness for `DurationText`: the input is duration text (`1m30s`, `2 weeks`, `0.5h`).
///
/// Asserts for every duration that parses: it lies in 0…100 years, and `format` writes it so that
/// `parse` reads back exactly the same duration (what `JobSpec.options` and the state store rely on).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDuration(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: fuzzInput(data, size), as: UTF8.self)
    guard let duration = try? DurationText.parse(text) else { return 0 }
    require(duration >= .zero && duration <= DurationText.maximum, "\(text.debugDescription) parsed to \(duration), outside 0…100 years")
    let formatted = DurationText.format(duration)
    do {
        let again = try DurationText.parse(formatted)
        require(again == duration, "\(text.debugDescription) parsed to \(duration), formatted as \(formatted.debugDescription), which parses to \(again)")
    } catch {
        require(false, "\(text.debugDescription) parsed to \(duration), formatted as \(formatted.debugDescription), which does not parse: \(error.message)")
    }
    return 0
}
