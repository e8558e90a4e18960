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
        var seen: Set<String> = []
        for option in options {
            if keys.contains(option.key), !seen.insert(option.key).inserted {
                throw TimerdError(.badArgument, "\(option.key) is given more than once", key: option.key)
            }
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
            if interval != nil {
                throw TimerdError(.badArgument, "interval applies only with repeats=yes", key: "interval")
            }
            rest.append(KeyValue("in", start ?? "0s"))
        }
        rest.append(KeyValue("overlap", async ? OverlapPolicy.allow.rawValue : OverlapPolicy.queue.rawValue))
        do {
            return try JobSpec(name: name, options: rest, argv: argv)
        } catch {
            throw execError(error, repeats: repeats)
        }
    }

    /// Renames the keys EXEC rewrote (`in`/`every`/`start`) back to the ones the client sent.
    private static func execError(_ error: TimerdError, repeats: Bool) -> TimerdError {
        let renamed: [String: String] = repeats ? ["every": "interval", "start": "start"] : ["in": "start"]
        guard let key = error.key, let sent = renamed[key] else { return error }
        var message = error.message
        if message.hasPrefix(key + ":") { message = sent + message.dropFirst(key.count) }
        if sent == "interval", message.hasPrefix("interval: interval must be") {
            message = "interval: must be" + message.dropFirst("interval: interval must be".count)
        }
        return TimerdError(error.code, message, key: sent)
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
