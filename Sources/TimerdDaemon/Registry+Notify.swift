import TimerdCore
import TimerdEngine
import TimerdProtocol
import TimerdSystem

/// The JSON a webhook sends when it has no `body=` (keys sorted).
struct DefaultWebhookBody: Encodable {
    var job: String
    var run: Int
    var scheduled_at: String
    var fired_at: String
    var meta: [String: String]
}

/// The JSON `on_failure=` / `on_recovery=` URLs receive.
struct TransitionNotice: Encodable {
    var event: String
    var job: String
    var run: Int
    var result: String
    var exit_code: Int?
    var http_status: Int?
    var reason: String
    var output: String
    var finished_at: String

    func encode(to encoder: any Encoder) throws {
        // Absent values are null, not missing: receivers can rely on every key.
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(event, forKey: .event)
        try c.encode(job, forKey: .job)
        try c.encode(run, forKey: .run)
        try c.encode(result, forKey: .result)
        try c.encode(exit_code, forKey: .exit_code)
        try c.encode(http_status, forKey: .http_status)
        try c.encode(reason, forKey: .reason)
        try c.encode(output, forKey: .output)
        // Under a name that says what it is: the last 4 KiB.
        try c.encode(output, forKey: .output_tail)
        try c.encode(finished_at, forKey: .finished_at)
    }

    enum CodingKeys: String, CodingKey {
        case event, job, run, result, exit_code, http_status, reason, output, output_tail, finished_at
    }
}

extension Registry {
    /// A webhook run's body: the job's template with its placeholders filled, or the default JSON object;
    /// nil for GET and HEAD.
    static func webhookBody(_ hook: Webhook, spec: JobSpec, runID: Int, scheduled: WallTime, fired: WallTime) -> String? {
        guard hook.hasBody else { return nil }
        let scheduledText = RFC3339.format(scheduled), firedText = RFC3339.format(fired)
        guard let template = hook.body else {
            return Payload.encode(DefaultWebhookBody(
                job: spec.name.rawValue, run: runID, scheduled_at: scheduledText, fired_at: firedText,
                meta: Dictionary(spec.meta.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })))
        }
        // Validated when the job was added, so every placeholder is known.
        return (try? Webhook.render(template) { name in
            switch name {
            case "job": return spec.name.rawValue
            case "run": return String(runID)
            case "scheduled_at": return scheduledText
            case "fired_at": return firedText
            default:
                guard name.hasPrefix("meta.") else { return nil }
                return spec.meta.first { $0.key == name.dropFirst(5) }?.value
            }
        }) ?? template
    }

    /// Sends the `on_failure` or `on_recovery` notice the engine decided on (once per transition). Sent
    /// off the registry's queue; a notice's own outcome is only logged.
    /// A command notice runs as the job's commands do (`runAs`).
    func notifyTransition(_ spec: JobSpec, runAs identity: RunAs?, runID: Int, outcome: RunOutcome, recovered: Bool) {
        let event: String
        let target: NotifyTarget
        if recovered {
            guard let onRecovery = spec.onRecovery else { return }
            (event, target) = ("recovery", onRecovery)
        } else {
            guard let onFailure = spec.onFailure else { return }
            (event, target) = ("failure", onFailure)
        }
        let name = spec.name.rawValue
        var request: RunRequest
        switch target {
        case .url(let url):
            request = RunRequest(
                job: name, runID: runID, action: .webhook(Webhook(url: url, retries: 2)), environment: [:],
                workingDirectory: "/", timeout: .seconds(10), killGrace: Limits.defaultKillGrace)
            request.webhookBody = Payload.encode(TransitionNotice(
                event: event, job: name, run: runID, result: outcome.result.rawValue, exit_code: outcome.exitCode,
                http_status: outcome.httpStatus, reason: outcome.reason, output: outcome.output,
                finished_at: RFC3339.format(outcome.finishedWall)))
        case .command(let line):
            var environment: [String: String] = [:]
            for pair in baseEnvironment(runAs: identity) { environment[pair.key] = pair.value }
            environment["TIMERD_JOB"] = name
            environment["TIMERD_RUN"] = String(runID)
            environment["TIMERD_EVENT"] = event
            environment["TIMERD_RESULT"] = outcome.result.rawValue
            environment["TIMERD_EXIT_CODE"] = outcome.exitCode.map(String.init) ?? ""
            environment["TIMERD_HTTP_STATUS"] = outcome.httpStatus.map(String.init) ?? ""
            environment["TIMERD_REASON"] = outcome.reason
            environment["TIMERD_OUTPUT"] = outcome.output
            environment["TIMERD_OUTPUT_TAIL"] = outcome.output
            request = RunRequest(
                job: name, runID: runID, action: .shell(line), environment: environment, workingDirectory: "/",
                timeout: .seconds(60), killGrace: Limits.defaultKillGrace)
            request.runAs = identity
        }
        let key = event == "failure" ? "on_failure" : "on_recovery"
        log.info(job: name, run: runID, "\(key): sending the \(event) notice")
        let log = self.log
        _ = launcher.start(request) { report in
            guard case .finished(let result) = report else { return }
            if result.result == .ok {
                log.info(job: name, run: runID, "\(key): notice delivered (\(result.reason))")
            } else {
                log.warning(job: name, run: runID, "\(key): notice failed: \(result.result.rawValue): \(result.reason)")
            }
        }
    }
}
