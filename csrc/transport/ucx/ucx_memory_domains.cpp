// UCX's memory domains, one by one (ucx_memory_domains.h)
#include "transport/ucx/ucx_memory_domains.h"

#include <vector>

namespace ringreduce {

void forEachUcxMemoryDomain(const std::function<bool(const char* component)>& wanted,
                            const std::function<void(const char* component, uct_md_h)>& visit) {
  uct_component_h* components = nullptr;
  unsigned componentCount = 0;
  if (uct_query_components(&components, &componentCount) != UCS_OK) return;
  for (unsigned c = 0; c < componentCount; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(components[c], &attr) != UCS_OK || !wanted(attr.name)) continue;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (uct_component_query(components[c], &attr) != UCS_OK) continue;
    for (const uct_md_resource_desc_t& resource : mds) {
      uct_md_config_t* mdConfig = nullptr;
      if (uct_md_config_read(components[c], nullptr, nullptr, &mdConfig) != UCS_OK) continue;
      uct_md_h md = nullptr;
      const ucs_status_t opened = uct_md_open(components[c], resource.md_name, mdConfig, &md);
      uct_config_release(mdConfig);
      if (opened != UCS_OK) continue;
      visit(attr.name, md);
      uct_md_close(md);
    }
  }
  uct_release_component_list(components);
}

}  // namespace ringreduce
