package dev.vmmkit.engine;

/**
 * A request the host cannot serve, with the HTTP status that says why: 400 malformed, 404 unknown,
 * 503 no device memory or a model marked failed, 500 the engine failed, 502 the engine's worker
 * died, 504 the engine ran past the request timeout.
 */
public final class RequestFailure extends RuntimeException {
    private final int status;

    private RequestFailure(int status, String message) {
        super(message);
        this.status = status;
    }

    public static RequestFailure badRequest(String message) {
        return new RequestFailure(400, message);
    }

    /** 413: the request body is over the limit. */
    public static RequestFailure tooLarge(String message) {
        return new RequestFailure(413, message);
    }

    public static RequestFailure notFound(String message) {
        return new RequestFailure(404, message);
    }

    public static RequestFailure engineFailed(String message) {
        return new RequestFailure(500, message);
    }

    public static RequestFailure outOfMemory(String message) {
        return new RequestFailure(503, message);
    }

    public static RequestFailure workerCrashed(String message) {
        return new RequestFailure(502, message);
    }

    public static RequestFailure timedOut(String message) {
        return new RequestFailure(504, message);
    }

    public static RequestFailure modelFailed(String message) {
        return new RequestFailure(503, message);
    }

    /** True when the engine's worker died (a crash, or ended by the host for a timeout). */
    boolean workerDied() {
        return status == 502 || status == 504;
    }

    public int status() {
        return status;
    }
}
