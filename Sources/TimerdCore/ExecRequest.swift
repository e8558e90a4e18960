/// `EXEC start= interval= repeats= async=`: the `execTask:start:interval:repeats:async:` verb, mapped onto
/// an ordinary job spec so there is one model underneath.
///
/// - `repeats=yes` → `every=interval` with `start=start`; `repeats=no` (default) → `in=start` (a one-shot).
/// - `async=yes` → `overlap=allow` (runs may overlap); `async=no` (default) → `overlap=queue`.
/// Every other job key (`command`, `timeout`, `env`, …) passes through unchanged.
public enum ExecRequest {
    public static let keys = ["start", "interval", "repeats", "async"]

    public static func spec(name: JobName, options: [KeyValue], argv: [String]?) throws(TimerdError) -> JobSpec {
        var rest: [KeyValue] = []
        var start: String?
        var interval: String?
        var repeats = false
        var async = false
        for option in options {
            switch option.key {
            case "start": start = option.value
            case "interval": interval = option.value
            case "repeats": repeats = try parseBool(option.value, key: "repeats")
            case "async": async = try parseBool(option.value, key: "async")
            case "every", "in", "at", "overlap":
                throw TimerdError(
                    .badArgument, "\(option.key) is not an EXEC option (use start=, interval=, repeats=, async=, or ADD)",
                    key: option.key)
            default: rest.append(option)
            }
        }
        if repeats {
            guard let interval else {
                throw TimerdError(.missingArgument, "repeats=yes needs interval=DUR", key: "interval")
            }
            rest.append(KeyValue("every", interval))
            rest.append(KeyValue("start", start ?? "0s"))
        } else {
            rest.append(KeyValue("in", start ?? "0s"))
        }
        rest.append(KeyValue("overlap", async ? OverlapPolicy.allow.rawValue : OverlapPolicy.queue.rawValue))
        return try JobSpec(name: name, options: rest, argv: argv)
    }

    /// Reads `yes/no`, `true/false`, `on/off`, `1/0`.
    public static func parseBool(_ text: String, key: String) throws(TimerdError) -> Bool {
        switch text.lowercased() {
        case "yes", "true", "on", "1": return true
        case "no", "false", "off", "0": return false
        default: throw TimerdError(.badArgument, "\(key): expected yes or no, got \"\(text)\"", key: key)
        }
    }
}
