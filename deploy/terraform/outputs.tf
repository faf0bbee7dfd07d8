output "namespace" {
  description = "The namespace Cove runs in."
  value       = kubernetes_namespace.cove.metadata[0].name
}

output "api_service" {
  description = "The Service the E2B SDKs reach the API replicas through (E2B_API_URL, E2B_SANDBOX_URL)."
  value       = "${helm_release.cove.name}-api.${kubernetes_namespace.cove.metadata[0].name}.svc"
}

output "release" {
  description = "The Helm release's name and revision."
  value       = { name = helm_release.cove.name, revision = helm_release.cove.metadata[0].revision }
}
