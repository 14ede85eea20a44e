package dev.vmmkit.engine;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/** Reads and checks the fields both HTTP dialects share; a bad one is a 400 naming it. */
final class RequestFields {
    static final Set<String> ROLES = Set.of("system", "user", "assistant", "tool", "developer");

    private RequestFields() {
    }

    static JsonNode object(JsonNode body, String expected) {
        if (body == null || !body.isObject()) throw RequestFailure.badRequest("the body must be a JSON object " + expected);
        return body;
    }

    static String text(JsonNode body, String field) {
        JsonNode node = body.get(field);
        // A missing field is called missing; a field of another type is named with what it must be.
        if (node == null || node.isMissingNode()) throw RequestFailure.badRequest("\"" + field + "\" is missing");
        if (!node.isTextual()) throw RequestFailure.badRequest("\"" + field + "\" must be a string, not " + node);
        if (node.asText().indexOf('\0') >= 0) throw RequestFailure.badRequest("\"" + field + "\" must not contain NUL characters");
        return node.asText();
    }

    /** -1 when absent. */
    static int maxTokens(JsonNode body, String field) {
        JsonNode node = body.get(field);
        if (node == null || node.isNull()) return -1;
        if (!node.canConvertToInt() || !node.isIntegralNumber()) throw RequestFailure.badRequest("\"" + field + "\" must be a whole number");
        int value = node.asInt();
        if (value < 0 || value > Completion.MAX_TOKENS_LIMIT) {
            throw RequestFailure.badRequest("\"" + field + "\" must be between 0 and " + Completion.MAX_TOKENS_LIMIT + ", not " + value);
        }
        return value;
    }

    static Double number(JsonNode body, String field, double min, double max) {
        JsonNode node = body.get(field);
        if (node == null || node.isNull()) return null;
        if (!node.isNumber()) throw RequestFailure.badRequest("\"" + field + "\" must be a number");
        double value = node.asDouble();
        if (!(value >= min && value <= max)) throw RequestFailure.badRequest("\"" + field + "\" must be between " + min + " and " + max + ", not " + value);
        return value;
    }

    static Long seed(JsonNode body, String field) {
        JsonNode node = body.get(field);
        if (node == null || node.isNull()) return null;
        if (!node.isIntegralNumber()) throw RequestFailure.badRequest("\"" + field + "\" must be a whole number");
        return node.asLong();
    }

    static List<String> stop(JsonNode body, String field) {
        JsonNode node = body.get(field);
        List<String> stops = new ArrayList<>();
        if (node == null || node.isNull()) return stops;
        if (node.isTextual()) stops.add(node.asText());
        else if (node.isArray()) {
            for (JsonNode item : node) {
                if (!item.isTextual()) throw RequestFailure.badRequest("\"" + field + "\" must be a string or a list of strings");
                stops.add(item.asText());
            }
        } else throw RequestFailure.badRequest("\"" + field + "\" must be a string or a list of strings");
        if (stops.size() > 16 || stops.stream().anyMatch(String::isEmpty)) throw RequestFailure.badRequest("\"" + field + "\" takes at most 16 non-empty strings");
        return stops;
    }

    static boolean flag(JsonNode body, String field, boolean fallback) {
        JsonNode node = body.get(field);
        if (node == null || node.isNull()) return fallback;
        if (!node.isBoolean()) throw RequestFailure.badRequest("\"" + field + "\" must be true or false");
        return node.asBoolean();
    }

    /** A chat's messages, each with a known role and text content (the text parts of a list of parts, joined). */
    static List<ChatMessage> chatMessages(JsonNode body) {
        JsonNode messages = body.get("messages");
        if (messages == null || !messages.isArray() || messages.isEmpty()) throw RequestFailure.badRequest("\"messages\" must be a non-empty list");
        List<ChatMessage> chat = new ArrayList<>(messages.size());
        for (int i = 0; i < messages.size(); i++) {
            JsonNode message = messages.get(i);
            if (!message.isObject()) throw RequestFailure.badRequest("messages[" + i + "] must be an object {\"role\", \"content\"}");
            JsonNode role = message.get("role");
            if (role == null || !role.isTextual() || !ROLES.contains(role.asText())) {
                throw RequestFailure.badRequest("messages[" + i + "].role must be one of " + new java.util.TreeSet<>(ROLES) + ", not " + role);
            }
            JsonNode content = message.get("content");
            String text;
            if (content == null || content.isNull()) text = "";
            else if (content.isTextual()) text = content.asText();
            else if (content.isArray()) {
                StringBuilder parts = new StringBuilder();
                for (JsonNode part : content) if (part.path("type").asText().equals("text")) parts.append(part.path("text").asText());
                text = parts.toString();
            } else throw RequestFailure.badRequest("messages[" + i + "].content must be a string");
            if (text.indexOf('\0') >= 0) throw RequestFailure.badRequest("messages[" + i + "].content must not contain NUL characters");
            chat.add(new ChatMessage(role.asText(), text));
        }
        return chat;
    }
}
